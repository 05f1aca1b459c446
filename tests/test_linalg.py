"""tg.linalg (and tg.cholesky_solve): the host ops of tapegrad/linalg.py and the
compositions, checked through every path: values against NumPy and PyTorch,
gradients against PyTorch in the compiled and the interpreted reverse, gradcheck and
gradgradcheck, create_graph, tg.compile / tg.record replays with new inputs,
batches with broadcasting, float32, and PyTorch's errors."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import engine
from tapegrad.core import tape
from tapegrad.core.registry import HOST, OPCODES, family

L = tg.linalg
INF = float("inf")


def rng(seed=0):
    return np.random.default_rng(seed)


def general(*shape, seed=0):
    """Well-conditioned square (or rectangular) matrices."""
    a = rng(seed).standard_normal(shape)
    if len(shape) >= 2 and shape[-1] == shape[-2]:
        a = a + 3.0 * np.eye(shape[-1])
    return a


def spd(*shape, seed=0):
    a = rng(seed).standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def leaf(a, dtype=None):
    return tg.tensor(a, dtype=dtype, requires_grad=True)


# -- one table: name -> (tapegrad function, torch function, inputs) ------------------------
# (outputs whose sign LAPACK chooses, eigenvectors and singular vectors, enter squared: a
# loss that does not depend on that choice, as PyTorch's gradient requires)
def _sq(t):
    return t * t


def _spd_of(m):
    return lambda x: m.matmul(x, x.transpose(-2, -1)) + 3.0 * m.eye(x.shape[-1], dtype=x.dtype)


CASES = {
    "solve": (lambda a, b: L.solve(a, b), lambda a, b: _t().linalg.solve(a, b), [general(3, 3), general(3, 2, seed=1)]),
    "solve_vector": (lambda a, b: L.solve(a, b), lambda a, b: _t().linalg.solve(a, b), [general(3, 3), general(3, seed=1)]),
    "solve_broadcast": (lambda a, b: L.solve(a, b), lambda a, b: _t().linalg.solve(a, b),
                        [general(2, 1, 3, 3), general(4, 3, 2, seed=1)]),
    "solve_left_false": (lambda a, b: L.solve(a, b, left=False), lambda a, b: _t().linalg.solve(a, b, left=False),
                         [general(3, 3), general(2, 3, seed=1)]),
    "inv": (L.inv, lambda a: _t().linalg.inv(a), [general(2, 3, 3)]),
    "det": (L.det, lambda a: _t().linalg.det(a), [general(2, 3, 3)]),
    "slogdet": (lambda a: L.slogdet(a).logabsdet, lambda a: _t().linalg.slogdet(a).logabsdet, [general(3, 3) - 6 * np.eye(3)]),
    "cholesky": (lambda x: L.cholesky(_spd_of(tg)(x)), lambda x: _t().linalg.cholesky(_spd_of(_t())(x)),
                 [general(2, 3, 3)]),
    "cholesky_upper": (lambda x: L.cholesky(_spd_of(tg)(x), upper=True),
                       lambda x: _t().linalg.cholesky(_spd_of(_t())(x), upper=True), [general(3, 3)]),
    "solve_triangular": (lambda a, b: L.solve_triangular(a.triu(), b, upper=True),
                         lambda a, b: _t().linalg.solve_triangular(a.triu(), b, upper=True),
                         [general(2, 3, 3), general(2, 3, 2, seed=1)]),
    "solve_triangular_right_unit": (
        lambda a, b: L.solve_triangular(a.tril(), b, upper=False, left=False, unitriangular=True),
        lambda a, b: _t().linalg.solve_triangular(a.tril(), b, upper=False, left=False, unitriangular=True),
        [general(3, 3), general(2, 3, seed=1)]),
    "cholesky_solve": (lambda b, c: tg.cholesky_solve(b, c.tril() + 3.0 * tg.eye(3, dtype=c.dtype)),
                       lambda b, c: _t().cholesky_solve(b, c.tril() + 3.0 * _t().eye(3, dtype=c.dtype)),
                       [general(3, 2, seed=1), rng(2).standard_normal((3, 3))]),
    "cholesky_solve_upper": (lambda b, c: tg.cholesky_solve(b, c.triu() + 3.0 * tg.eye(3, dtype=c.dtype), True),
                             lambda b, c: _t().cholesky_solve(b, c.triu() + 3.0 * _t().eye(3, dtype=c.dtype), True),
                             [general(3, 2, seed=1), rng(2).standard_normal((3, 3))]),
    "eigh": (lambda a: tg.cat([L.eigh(a + a.mT).eigenvalues.reshape(-1), _sq(L.eigh(a + a.mT).eigenvectors).reshape(-1)]),
             lambda a: _t().cat([_t().linalg.eigh(a + a.mT).eigenvalues.reshape(-1),
                                 _sq(_t().linalg.eigh(a + a.mT).eigenvectors).reshape(-1)]),
             [general(2, 3, 3)]),
    "eigh_upper": (lambda a: L.eigh(a + a.mT, UPLO="U").eigenvalues,
                   lambda a: _t().linalg.eigh(a + a.mT, UPLO="U").eigenvalues, [general(3, 3)]),
    "eigvalsh": (lambda a: L.eigvalsh(a + a.mT), lambda a: _t().linalg.eigvalsh(a + a.mT), [general(3, 3)]),
    "svd": (lambda a: tg.cat([_sq(t).reshape(-1) for t in L.svd(a, full_matrices=False)]),
            lambda a: _t().cat([_sq(t).reshape(-1) for t in _t().linalg.svd(a, full_matrices=False)]),
            [general(2, 4, 3)]),
    "svd_wide": (lambda a: tg.cat([_sq(t).reshape(-1) for t in L.svd(a, full_matrices=False)]),
                 lambda a: _t().cat([_sq(t).reshape(-1) for t in _t().linalg.svd(a, full_matrices=False)]),
                 [general(3, 5)]),
    "svd_full": (lambda a: _sq(L.svd(a).U[..., :3]), lambda a: _sq(_t().linalg.svd(a).U[..., :3]), [general(5, 3)]),
    "svdvals": (L.svdvals, lambda a: _t().linalg.svdvals(a), [general(2, 4, 3)]),
    "qr": (lambda a: tg.cat([t.reshape(-1) for t in L.qr(a)]),
           lambda a: _t().cat([t.reshape(-1) for t in _t().linalg.qr(a)]), [general(2, 4, 3)]),
    "qr_wide": (lambda a: tg.cat([t.reshape(-1) for t in L.qr(a)]),
                lambda a: _t().cat([t.reshape(-1) for t in _t().linalg.qr(a)]), [general(3, 5)]),
    "qr_complete_wide": (lambda a: tg.cat([t.reshape(-1) for t in L.qr(a, mode="complete")]),
                         lambda a: _t().cat([t.reshape(-1) for t in _t().linalg.qr(a, mode="complete")]),
                         [general(3, 4)]),
    "matrix_exp": (L.matrix_exp, lambda a: _t().linalg.matrix_exp(a), [0.3 * rng(3).standard_normal((2, 3, 3))]),
    "pinv": (L.pinv, lambda a: _t().linalg.pinv(a), [general(2, 4, 3)]),
    "pinv_wide": (L.pinv, lambda a: _t().linalg.pinv(a), [general(3, 4)]),
    "pinv_hermitian": (lambda a: L.pinv(a + a.mT, hermitian=True),
                       lambda a: _t().linalg.pinv(a + a.mT, hermitian=True), [general(3, 3)]),
    "lstsq": (lambda a, b: L.lstsq(a, b).solution, lambda a, b: _t().linalg.lstsq(a, b).solution,
              [general(5, 3), general(5, 2, seed=1)]),
    "lstsq_wide": (lambda a, b: L.lstsq(a, b).solution, lambda a, b: _t().linalg.lstsq(a, b, driver="gelsd").solution,
                   [general(2, 4), general(2, 3, seed=1)]),
    "matrix_power": (lambda a: L.matrix_power(a, 3), lambda a: _t().linalg.matrix_power(a, 3), [general(2, 3, 3)]),
    "matrix_power_negative": (lambda a: L.matrix_power(a, -2), lambda a: _t().linalg.matrix_power(a, -2),
                              [general(3, 3)]),
    "multi_dot": (lambda a, b, c, d: L.multi_dot([a, b, c, d]), lambda a, b, c, d: _t().linalg.multi_dot([a, b, c, d]),
                  [general(3, seed=1), general(3, 5, seed=2), general(5, 2, seed=3), general(2, seed=4)]),
    "lu_factor": (lambda a: L.lu_factor(a).LU, lambda a: _t().linalg.lu_factor(a).LU, [general(2, 3, 3)]),
    "lu_solve": (lambda a, b: L.lu_solve(*L.lu_factor(a), b), lambda a, b: _t().linalg.lu_solve(*_t().linalg.lu_factor(a), b),
                 [general(2, 3, 3), general(2, 3, 2, seed=1)]),
    "lu_solve_right_adjoint": (lambda a, b: L.lu_solve(*L.lu_factor(a), b, left=False, adjoint=True),
                               lambda a, b: _t().linalg.lu_solve(*_t().linalg.lu_factor(a), b, left=False, adjoint=True),
                               [general(3, 3), general(2, 3, seed=1)]),
    "norm": (L.norm, lambda a: _t().linalg.norm(a), [general(2, 3, 4)]),
    "norm_matrix_ord": (lambda a: L.norm(a, "nuc"), lambda a: _t().linalg.norm(a, "nuc"), [general(3, 4)]),
    "norm_dim": (lambda a: L.norm(a, 3, dim=1, keepdim=True), lambda a: _t().linalg.norm(a, 3, dim=1, keepdim=True),
                 [general(2, 3, 4)]),
}
for _o in (2, 1, 0.5, 1.5, 3, INF, -INF, 0):
    CASES["vector_norm_%s" % _o] = (lambda a, o=_o: L.vector_norm(a, o, dim=(0, 2)),
                                    lambda a, o=_o: _t().linalg.vector_norm(a, o, dim=(0, 2)), [general(2, 3, 4)])
for _o in ("fro", "nuc", 1, -1, 2, -2, INF, -INF):
    CASES["matrix_norm_%s" % _o] = (lambda a, o=_o: L.matrix_norm(a, o), lambda a, o=_o: _t().linalg.matrix_norm(a, o),
                                    [general(2, 3, 4)])
CASES["matrix_norm_dims_keepdim"] = (lambda a: L.matrix_norm(a, 1, dim=(2, 0), keepdim=True),
                                     lambda a: _t().linalg.matrix_norm(a, 1, dim=(2, 0), keepdim=True),
                                     [general(2, 3, 4)])
# the cases whose second derivative exists (the extrema of the norms: piecewise linear)
_LINEAR_PIECES = {"vector_norm_1", "vector_norm_inf", "vector_norm_-inf", "vector_norm_0", "matrix_norm_1",
                  "matrix_norm_-1", "matrix_norm_inf", "matrix_norm_-inf", "matrix_norm_dims_keepdim"}


def _t():
    import torch
    return torch


def _weights(shape, seed=7):
    return rng(seed).standard_normal(shape)


def _tg_loss(fn, xs):
    y = fn(*xs)
    return (y * tg.tensor(_weights(y.shape))).sum()


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_match_torch_compiled_and_interpreted(name, monkeypatch):
    torch = pytest.importorskip("torch")
    fn, tfn, arrays = CASES[name]
    ty = tfn(*[torch.tensor(a) for a in arrays])
    np.testing.assert_allclose(fn(*[tg.tensor(a) for a in arrays]).numpy(), ty.numpy(), rtol=1e-10, atol=1e-12)
    tx = [torch.tensor(a, requires_grad=True) for a in arrays]
    (tfn(*tx) * torch.tensor(_weights(ty.shape))).sum().backward()
    for mode in ("never", "always"):
        monkeypatch.setattr(engine, "INTERPRET", [mode])
        xs = [leaf(a) for a in arrays]
        _tg_loss(fn, xs).backward()
        for x, t in zip(xs, tx):
            want = np.zeros(t.shape) if t.grad is None else t.grad.numpy()
            np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-8, atol=1e-10, err_msg=mode)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck_and_gradgradcheck(name):
    fn, _, arrays = CASES[name]
    xs = [leaf(a) for a in arrays]
    assert tg.autograd.gradcheck(fn, xs)
    if name not in _LINEAR_PIECES:
        assert tg.autograd.gradgradcheck(fn, xs)


@pytest.mark.parametrize("name", ["solve", "inv", "slogdet", "cholesky", "eigh", "svd", "qr", "pinv", "matrix_exp",
                                  "lu_solve",
                                  "solve_triangular", "cholesky_solve", "vector_norm_2", "matrix_norm_nuc", "lstsq"])
def test_create_graph_second_derivative_matches_torch(name):
    torch = pytest.importorskip("torch")
    fn, tfn, arrays = CASES[name]
    xs = [leaf(a) for a in arrays]
    gs = tg.autograd.grad(_tg_loss(fn, xs), xs, create_graph=True)
    hs = tg.autograd.grad(sum((g * g).sum() for g in gs), xs)
    tx = [torch.tensor(a, requires_grad=True) for a in arrays]
    ty = tfn(*tx)
    tgs = torch.autograd.grad((ty * torch.tensor(_weights(ty.shape))).sum(), tx, create_graph=True)
    ths = torch.autograd.grad(sum((g * g).sum() for g in tgs), tx)
    for h, th in zip(hs, ths):
        np.testing.assert_allclose(h.numpy(), th.numpy(), rtol=1e-7, atol=1e-9)


# -- values against NumPy and literal values (no torch) -------------------------------------
def test_values_against_numpy():
    A, B, S = general(2, 3, 3), general(2, 3, 2, seed=1), spd(2, 3, 3)
    np.testing.assert_allclose(L.solve(tg.tensor(A), tg.tensor(B)).numpy(), np.linalg.solve(A, B))
    np.testing.assert_allclose(L.inv(tg.tensor(A)).numpy(), np.linalg.inv(A))
    np.testing.assert_allclose(L.det(tg.tensor(A)).numpy(), np.linalg.det(A))
    sign, logabs = L.slogdet(tg.tensor(A))
    np.testing.assert_allclose(sign.numpy(), np.linalg.slogdet(A)[0])
    np.testing.assert_allclose(logabs.numpy(), np.linalg.slogdet(A)[1])
    np.testing.assert_allclose(L.cholesky(tg.tensor(S)).numpy(), np.linalg.cholesky(S))
    np.testing.assert_allclose(L.cholesky(tg.tensor(S), upper=True).numpy(), np.swapaxes(np.linalg.cholesky(S), 1, 2))
    np.testing.assert_allclose(L.eigvalsh(tg.tensor(S)).numpy(), np.linalg.eigvalsh(S))
    w, V = L.eigh(leaf(S))
    np.testing.assert_allclose((V @ tg.diag_embed(w) @ V.mT).detach().numpy(), S, atol=1e-12)
    U, s, Vh = L.svd(leaf(general(4, 3)), full_matrices=False)
    assert U.shape == (4, 3) and s.shape == (3,) and Vh.shape == (3, 3)
    np.testing.assert_allclose((U * s) .detach().numpy() @ Vh.detach().numpy(), general(4, 3), atol=1e-12)
    assert [t.shape for t in L.svd(tg.tensor(general(4, 3)))] == [(4, 4), (3,), (3, 3)]
    Q, R = L.qr(leaf(general(4, 3)))
    np.testing.assert_allclose((Q @ R).detach().numpy(), general(4, 3), atol=1e-12)
    assert [t.shape for t in L.qr(tg.tensor(general(4, 3)), mode="complete")] == [(4, 4), (4, 3)]
    assert L.qr(tg.tensor(general(4, 3)), mode="r").Q.shape == (0,)
    from scipy.linalg import expm
    np.testing.assert_allclose(L.matrix_exp(tg.tensor(A * 0.3)).numpy(), expm(A * 0.3))
    np.testing.assert_allclose(L.pinv(tg.tensor(general(4, 3))).numpy(), np.linalg.pinv(general(4, 3)))
    x = L.lstsq(tg.tensor(general(5, 3)), tg.tensor(general(5, 2, seed=1))).solution
    np.testing.assert_allclose(x.numpy(), np.linalg.lstsq(general(5, 3), general(5, 2, seed=1), rcond=None)[0])
    T = np.triu(A)
    np.testing.assert_allclose(L.solve_triangular(tg.tensor(T), tg.tensor(B), upper=True).numpy(),
                               np.linalg.solve(T, B))
    C = np.linalg.cholesky(S)
    np.testing.assert_allclose(tg.cholesky_solve(tg.tensor(B), tg.tensor(C)).numpy(), np.linalg.solve(S, B))
    np.testing.assert_allclose(L.matrix_power(tg.tensor(A), 3).numpy(), np.linalg.matrix_power(A, 3))
    np.testing.assert_allclose(L.matrix_power(tg.tensor(A), -2).numpy(), np.linalg.matrix_power(A, -2))
    assert L.matrix_power(tg.tensor(A), 0).tolist() == np.broadcast_to(np.eye(3), (2, 3, 3)).tolist()
    M = general(3, 4)
    for o in ("fro", "nuc", 1, -1, 2, -2, INF, -INF):
        np.testing.assert_allclose(L.matrix_norm(tg.tensor(M), o).item(), np.linalg.norm(M, o))
    v = general(5)
    for o in (2, 1, 0.5, 3, INF, -INF, 0):
        np.testing.assert_allclose(L.vector_norm(tg.tensor(v), o).item(), np.linalg.norm(v, o))
    np.testing.assert_allclose(L.norm(tg.tensor(M)).item(), np.linalg.norm(M))
    np.testing.assert_allclose(L.multi_dot([tg.tensor(M), tg.tensor(M.T), tg.tensor(M)]).numpy(), M @ M.T @ M)


def test_literal_values():
    a = tg.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)
    assert L.det(a).item() == pytest.approx(5.0)
    np.testing.assert_allclose(L.inv(a).detach().numpy(), [[0.6, -0.2], [-0.2, 0.4]])
    assert L.solve(a, tg.tensor([3.0, 4.0])).tolist() == pytest.approx([1.0, 1.0])
    (g,) = tg.autograd.grad(L.det(a), a)          # d det / dA = det * A^{-T} = [[3, -1], [-1, 2]]
    np.testing.assert_allclose(g.numpy(), [[3.0, -1.0], [-1.0, 2.0]])
    assert L.vector_norm(tg.tensor([3.0, 4.0])).item() == 5.0
    assert L.matrix_norm(tg.tensor([[1.0, -2.0], [3.0, 4.0]]), 1).item() == 6.0
    assert L.matrix_norm(tg.tensor([[1.0, -2.0], [3.0, 4.0]]), INF).item() == 7.0
    z = tg.zeros(3, requires_grad=True)           # PyTorch's gradient of the 2-norm at 0: zero, not nan
    L.vector_norm(z).backward()
    assert z.grad.tolist() == [0.0, 0.0, 0.0]


def test_grad_fn_names_and_one_entry_per_factorisation():
    x = leaf(spd(3, 3))
    assert L.cholesky(x).grad_fn.name() == "LinalgCholeskyExBackward0"
    assert L.inv(x).grad_fn.name() == "LinalgInvExBackward0"
    assert L.det(x).grad_fn.name() == "LinalgDetBackward0"
    for f, name in ((L.eigh, "LinalgEighBackward0"), (L.svd, "LinalgSvdBackward0"), (L.qr, "LinalgQrBackward0"),
                    (L.slogdet, "LinalgSlogdetBackward0")):
        assert [t.grad_fn.name() for t in f(x)] == [name] * len(f(x))      # (PyTorch's names of every output)
    T = tape.current()
    n0 = T.n
    L.eigh(x)
    ints, _ = T.arrays()
    ops = [int(op) for op in ints[n0:T.n, tape.OP]]
    assert ops.count(OPCODES["linalg_eigh"]) == 1 and family(OPCODES["linalg_eigh"]) == HOST


def test_det_gradient_at_singular_matrices_is_the_cofactor_matrix(reverse):
    for a in ([[1.0, 2.0], [2.0, 4.0]], [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]):
        x = leaf(a)
        L.det(x).backward()
        cof = {2: [[4.0, -2.0], [-2.0, 1.0]], 3: [[-3.0, 6.0, -3.0], [6.0, -12.0, 6.0], [-3.0, 6.0, -3.0]]}[len(a)]
        np.testing.assert_allclose(x.grad.numpy(), cof, atol=1e-12)
        assert tg.autograd.gradcheck(L.det, (leaf(a),))


def test_repeated_eigenvalues_eigvalsh_and_svdvals_have_finite_gradients(reverse):
    # only the eigenvalues are used: no division by their differences (PyTorch's undefined gV)
    a = tg.tensor(np.eye(3), requires_grad=True)
    L.eigvalsh(a).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.eye(3), atol=1e-12)
    b = tg.tensor(np.eye(3), requires_grad=True)
    L.svdvals(b).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), np.eye(3), atol=1e-12)


def test_float32():
    torch = pytest.importorskip("torch")
    a32 = general(2, 3, 3).astype(np.float32)
    for name in ("inv", "det", "cholesky", "eigh", "svd", "solve_triangular", "pinv", "matrix_exp", "vector_norm_2"):
        fn, tfn, arrays = CASES[name]
        arrays = [a.astype(np.float32) for a in arrays]
        xs = [leaf(a, tg.float32) for a in arrays]
        y = fn(*xs)
        assert y.dtype == tg.float32
        _tg_loss(fn, xs).backward()
        tx = [torch.tensor(a, requires_grad=True) for a in arrays]
        ty = tfn(*tx)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-5)
        (ty * torch.tensor(_weights(ty.shape), dtype=torch.float32)).sum().backward()
        for x, t in zip(xs, tx):
            assert x.grad.dtype == tg.float32
            np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=2e-3, atol=2e-4)
    assert L.solve(tg.tensor(a32), tg.tensor(a32)).dtype == tg.float32


def test_hooks_and_retain_grad_on_host_outputs(reverse):
    a = leaf(general(3, 3))
    y = L.inv(a)
    y.retain_grad()
    y.register_hook(lambda g: g * 2.0)
    y.sum().backward()
    ai = np.linalg.inv(general(3, 3))
    assert y.grad.tolist() == (2.0 * np.ones((3, 3))).tolist()     # (retain_grad sees the hooked gradient)
    np.testing.assert_allclose(a.grad.numpy(), -2.0 * ai.T @ np.ones((3, 3)) @ ai.T)


def test_host_entries_among_compiled_ones_and_unused_outputs(reverse):
    # large adjoints (own arrays, written first by the host rule) and an output nothing reaches
    a = leaf(general(60, 60))
    U, S, Vh = L.svd(a)
    loss = (S * S).sum() + (L.inv(a) * 3.0).sum()
    loss.backward()
    want = 2.0 * np.asarray(a.detach().numpy())
    ai = np.linalg.inv(general(60, 60))
    want = want + (-3.0 * ai.T @ np.ones((60, 60)) @ ai.T)
    np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-8, atol=1e-8)


def test_second_backward_without_retain_graph_is_an_error():
    a = leaf(general(3, 3))
    y = L.inv(a).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()


# -- replay ----------------------------------------------------------------------------------
def _body(m):
    L_ = m.linalg

    def body(a, b, e):
        S = a @ a.mT + e
        C = L_.cholesky(S)
        w, V = L_.eigh(S)
        X = L_.solve(S, b)
        return (L_.slogdet(S).logabsdet + (X * X).sum() + (C * C).sum() + w.sum() + (V * V)[0].sum()
                + L_.svdvals(a).sum() + L_.vector_norm(b) + L_.det(a) + L_.matrix_norm(a, "nuc")
                + L_.solve_triangular(C, b, upper=False).sum() + L_.qr(a).R.abs().sum()
                + L_.matrix_exp(0.1 * a).sum() + L_.pinv(a).sum())
    return body


def _torch_value_and_grads(av, bv):
    torch = pytest.importorskip("torch")
    a, b = torch.tensor(av, requires_grad=True), torch.tensor(bv, requires_grad=True)
    out = _body(torch)(a, b, 3.0 * torch.eye(3, dtype=torch.float64))
    out.backward()
    return out.item(), a.grad.numpy(), b.grad.numpy()


def test_compile_replays_with_new_inputs(reverse):
    cf = tg.compile(_body(tg))
    e = tg.tensor(3.0 * np.eye(3))
    r = rng(2)
    for _ in range(3):
        av, bv = r.standard_normal((3, 3)) + 2 * np.eye(3), r.standard_normal((3, 2))
        a, b = leaf(av), leaf(bv)
        out = cf(a, b, e)
        out.backward()
        v, ga, gb = _torch_value_and_grads(av, bv)
        assert out.item() == pytest.approx(v, rel=1e-11)
        np.testing.assert_allclose(a.grad.numpy(), ga, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(b.grad.numpy(), gb, rtol=1e-9, atol=1e-10)
    assert cf.stats.recordings == 1 and cf.stats.replays == 2


def test_record_replays_with_new_inputs():
    r = rng(4)
    e = 3.0 * np.eye(3)
    rec = tg.record(_body(tg), r.standard_normal((3, 3)) + 2 * np.eye(3), r.standard_normal((3, 2)), e)
    for _ in range(2):
        av, bv = r.standard_normal((3, 3)) + 2 * np.eye(3), r.standard_normal((3, 2))
        v, (ga, gb, _) = rec.value_and_grad(av, bv, e)
        tv, tga, tgb = _torch_value_and_grads(av, bv)
        assert v == pytest.approx(tv, rel=1e-11)
        np.testing.assert_allclose(ga, tga, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(gb, tgb, rtol=1e-9, atol=1e-10)


def test_tape_file_of_host_ops_loads_and_replays(tmp_path):
    r = rng(5)
    e = 3.0 * np.eye(3)
    args = (r.standard_normal((3, 3)) + 2 * np.eye(3), r.standard_normal((3, 2)), e)
    rec = tg.record(_body(tg), *args)
    path = str(tmp_path / "linalg.tape")
    rec.save(path)
    loaded = tg.load_tape(path)
    av, bv = r.standard_normal((3, 3)) + 2 * np.eye(3), r.standard_normal((3, 2))
    v, (ga, gb, _) = loaded.value_and_grad(av, bv, e)
    w, (ha, hb, _) = rec.value_and_grad(av, bv, e)
    assert v == w
    np.testing.assert_array_equal(ga, ha)
    np.testing.assert_array_equal(gb, hb)


# -- PyTorch's signatures and errors ---------------------------------------------------------
def _errors(f, *args, **kw):
    try:
        f(*args, **kw)
    except Exception as e:      # noqa: BLE001  (the type and text are compared)
        return type(e).__name__.lstrip("_"), str(e)
    return None


_S = [[1.0, 2.0], [2.0, 4.0]]
_NPD = [[1.0, 2.0], [2.0, 1.0]]
ERROR_CASES = [
    ("solve", lambda m: (m.tensor(_S, dtype=m.float64), m.ones(2, 1, dtype=m.float64)), {}),
    ("solve", lambda m: (m.stack([m.eye(2, dtype=m.float64), m.tensor(_S, dtype=m.float64)]),
                         m.ones(2, 2, 1, dtype=m.float64)), {}),
    ("solve", lambda m: (m.ones(2, 3, dtype=m.float64), m.ones(2, 1, dtype=m.float64)), {}),
    ("solve", lambda m: (m.ones(2, dtype=m.float64), m.ones(2, dtype=m.float64)), {}),
    ("solve", lambda m: (m.eye(2, dtype=m.float64), m.ones(3, 1, dtype=m.float64)), {}),
    ("solve", lambda m: (m.eye(2, dtype=m.float64), m.ones(2, 1, dtype=m.float32)), {}),
    ("solve", lambda m: (m.eye(2, dtype=m.int64), m.ones(2, 1, dtype=m.int64)), {}),
    ("inv", lambda m: (m.tensor(_S, dtype=m.float64),), {}),
    ("inv", lambda m: (m.stack([m.eye(2, dtype=m.float64), m.tensor(_S, dtype=m.float64)]),), {}),
    ("inv", lambda m: (m.ones(2, 3, dtype=m.float64),), {}),
    ("inv", lambda m: (m.ones(3, dtype=m.float64),), {}),
    ("inv", lambda m: (m.eye(2, dtype=m.int64),), {}),
    ("det", lambda m: (m.ones(2, 3, dtype=m.float64),), {}),
    ("slogdet", lambda m: (m.ones(2, 3, dtype=m.float64),), {}),
    ("cholesky", lambda m: (m.tensor(_NPD, dtype=m.float64),), {}),
    ("cholesky", lambda m: (m.stack([m.eye(2, dtype=m.float64), m.tensor(_NPD, dtype=m.float64)]),), {}),
    ("cholesky", lambda m: (m.ones(2, 3, dtype=m.float64),), {}),
    ("solve_triangular", lambda m: (m.ones(2, 3, dtype=m.float64), m.ones(2, 1, dtype=m.float64)), {"upper": True}),
    ("solve_triangular", lambda m: (m.eye(2, dtype=m.float64), m.ones(2, dtype=m.float64)), {"upper": True}),
    ("solve_triangular", lambda m: (m.eye(2, dtype=m.float64), m.ones(3, 1, dtype=m.float64)), {"upper": True}),
    ("eigh", lambda m: (m.ones(2, 3, dtype=m.float64),), {}),
    ("eigh", lambda m: (m.eye(2, dtype=m.float64),), {"UPLO": "X"}),
    ("eigvalsh", lambda m: (m.ones(2, 3, dtype=m.float64),), {}),
    ("matrix_power", lambda m: (m.ones(2, 3, dtype=m.float64), 2), {}),
    ("matrix_power", lambda m: (m.tensor(_S, dtype=m.float64), -1), {}),
    ("multi_dot", lambda m: ([m.ones(2, 3, dtype=m.float64)],), {}),
    ("multi_dot", lambda m: ([m.ones(2, 3, dtype=m.float64), m.ones(2, 3, dtype=m.float64)],), {}),
    ("multi_dot", lambda m: ([m.ones(2, 2, 2, dtype=m.float64), m.ones(2, 2, dtype=m.float64)],), {}),
    ("multi_dot", lambda m: ([m.ones(2, 2, dtype=m.float64), m.ones(2, 2, dtype=m.float32)],), {}),
    ("vector_norm", lambda m: (m.ones(2, dtype=m.int64),), {}),
    ("vector_norm", lambda m: (m.ones(2, dtype=m.float64),), {"ord": "fro"}),
    ("vector_norm", lambda m: (m.ones(0, dtype=m.float64),), {"ord": INF}),
    ("matrix_norm", lambda m: (m.ones(2, dtype=m.float64),), {}),
    ("matrix_norm", lambda m: (m.ones(2, 2, dtype=m.float64),), {"ord": 3}),
    ("matrix_norm", lambda m: (m.ones(2, 2, dtype=m.float64),), {"ord": "abc"}),
    ("matrix_norm", lambda m: (m.ones(2, 2, dtype=m.float64),), {"dim": (0, 0)}),
    ("norm", lambda m: (m.ones(2, 2, 2, dtype=m.float64),), {"ord": 2}),
    ("norm", lambda m: (m.ones(2, 2, 2, dtype=m.float64),), {"dim": (0, 1, 2)}),
    ("qr", lambda m: (m.ones(3, 2, dtype=m.float64),), {"mode": "x"}),
    ("matrix_exp", lambda m: (m.ones(2, 3, dtype=m.float64),), {}),
    ("lstsq", lambda m: (m.ones(4, 2, dtype=m.float64), m.ones(3, 1, dtype=m.float64)), {}),
    ("solve", lambda m: (m.ones(2, 3, 3, dtype=m.float64), m.ones(4, 3, 1, dtype=m.float64)), {}),
    ("solve_triangular", lambda m: (m.ones(2, 3, 3, dtype=m.float64), m.ones(4, 3, 1, dtype=m.float64)),
     {"upper": True}),
    ("lu_factor", lambda m: (m.tensor(_S, dtype=m.float64),), {}),
    ("lu_factor", lambda m: (m.ones(3, dtype=m.float64),), {}),
    ("lu_factor", lambda m: (m.eye(3, dtype=m.float64),), {"pivot": False}),
    ("lu_solve", lambda m: (m.eye(3, dtype=m.float64), m.tensor([1, 2, 3], dtype=m.int32),
                            m.ones(2, 1, dtype=m.float64)), {}),
]


@pytest.mark.parametrize("i", range(len(ERROR_CASES)))
def test_errors_match_torch(i):
    torch = pytest.importorskip("torch")
    name, make, kw = ERROR_CASES[i]
    want = _errors(getattr(torch.linalg, name), *make(torch), **kw)
    got = _errors(getattr(L, name), *make(tg), **kw)
    assert want is not None and got == want


def test_cholesky_solve_errors_match_torch():
    torch = pytest.importorskip("torch")
    for m_b, m_l in (((2, 1), (2, 3)), ((4, 3, 1), (2, 3, 3))):
        want = _errors(torch.cholesky_solve, torch.ones(*m_b, dtype=torch.float64), torch.ones(*m_l, dtype=torch.float64))
        got = _errors(tg.cholesky_solve, tg.ones(*m_b, dtype=tg.float64), tg.ones(*m_l, dtype=tg.float64))
        assert got == want


@pytest.mark.parametrize("case", [("qr", {"mode": "complete"}, (3, 2), "Q"), ("qr", {"mode": "r"}, (3, 2), "R")])
def test_qr_backward_errors_match_torch(case):
    torch = pytest.importorskip("torch")
    name, kw, shape, field = case
    a = general(*shape)
    ta = torch.tensor(a, requires_grad=True)
    want = _errors(lambda: getattr(getattr(torch.linalg, name)(ta, **kw), field).sum().backward())
    x = leaf(a)
    got = _errors(lambda: getattr(getattr(L, name)(x, **kw), field).sum().backward())
    assert want is not None and got == want


def test_cholesky_ex_and_lstsq_fields():
    torch = pytest.importorskip("torch")
    res = L.cholesky_ex(tg.tensor(_NPD))
    tres = torch.linalg.cholesky_ex(torch.tensor(_NPD, dtype=torch.float64))
    assert res.info.item() == tres.info.item() == 2 and res.info.dtype == tg.int32
    np.testing.assert_allclose(res.L.numpy(), tres.L.numpy())
    ok = L.cholesky_ex(leaf(spd(3, 3)))
    assert ok.info.item() == 0 and ok.L.grad_fn is not None
    a, b = general(5, 3), general(5, 2, seed=1)
    for driver in (None, "gelsd"):
        r = L.lstsq(tg.tensor(a), tg.tensor(b), driver=driver)
        t = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
        for f in ("solution", "residuals", "rank", "singular_values"):
            np.testing.assert_allclose(getattr(r, f).numpy(), getattr(t, f).numpy(), rtol=1e-10, err_msg=f)
            assert getattr(r, f).shape == tuple(getattr(t, f).shape), f


def test_out_is_refused():
    with pytest.raises(TypeError, match="out= is not supported"):
        L.inv(tg.eye(2, dtype=tg.float64), out=tg.zeros(2, 2))


def _doc_parameters(doc):
    """The parameter names of a PyTorch docstring's first line, ``name(a, b=(1, 2), *, c=None) -> T``."""
    line = doc.strip().splitlines()[0]
    inner = line[line.index("(") + 1:line.rindex(")", 0, line.index(" ->") if " ->" in line else len(line))]
    names, depth, cur = [], 0, ""
    for ch in inner + ",":
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            cur = cur.strip()
            if cur and cur != "*":
                names.append(cur.split("=")[0].split()[-1])      # ("bool pivot": the name)
            cur = ""
        else:
            cur += ch
    return names


def test_signatures_match_torch():
    torch = pytest.importorskip("torch")
    import inspect
    for name in L.__all__:
        if name == "LinAlgError":
            continue
        names = list(inspect.signature(getattr(L, name)).parameters)
        assert names == _doc_parameters(getattr(torch.linalg, name).__doc__), name
    # (cholesky_solve's docstring says B, L; its keywords are input, input2)
    assert list(inspect.signature(tg.cholesky_solve).parameters) == ["input", "input2", "upper", "out"]


@pytest.mark.parametrize("name,args", [("det", ()), ("slogdet", ()), ("logdet", ()), ("inverse", ()),
                                       ("matrix_power", (3,)), ("matrix_exp", ()), ("pinverse", ()),
                                       ("cholesky_solve", ("L",))])
def test_torch_namespace_functions_and_tensor_methods(name, args):
    torch = pytest.importorskip("torch")
    a = spd(2, 3, 3) * 0.2
    lv = np.linalg.cholesky(spd(3, 3))

    def run(m, x, method):
        extra = [m.tensor(lv) if v == "L" else v for v in args]
        out = getattr(x, name)(*extra) if method else getattr(m, name)(x, *extra)
        out = out[1] if name == "slogdet" else out
        return out
    for method in (False, True):
        x, tx = leaf(a), torch.tensor(a, requires_grad=True)
        y, ty = run(tg, x, method), run(torch, tx, method)
        # (atol: cholesky_solve's off-diagonal zeros come out as LAPACK's roundoff, about 1e-18)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-14)
        (y * tg.tensor(_weights(y.shape))).sum().backward()
        (ty * torch.tensor(_weights(ty.shape))).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-10)
    assert np.isnan(tg.logdet(tg.tensor([[0.0, 1.0], [1.0, 0.0]])).item())       # (a negative determinant)


def test_lu_factor_replayed_where_the_pivots_differ_from_the_recording():
    """The reverse of lu_factor permutes by the pivots of A's value at the backward, not
    the recording's: a recorded tape replayed (and a tg.compile'd function called) where A
    pivots otherwise gives the eager gradient and H v."""
    rng = np.random.default_rng(3)
    x0, x1, w, v = (rng.standard_normal(9) for _ in range(4))
    assert (tg.linalg.lu_factor(tg.tensor(x0.reshape(3, 3)))[1].tolist()
            != tg.linalg.lu_factor(tg.tensor(x1.reshape(3, 3)))[1].tolist())

    def f(x, w):
        return (tg.linalg.lu_factor(x.reshape(3, 3))[0] ** 2 * w.reshape(3, 3)).sum()
    X = tg.tensor(x1, requires_grad=True)
    f(X, tg.tensor(w)).backward()
    R = tg.record(f, x0, w)
    y, (gx, _) = R.value_and_grad(x1, w)
    assert y == pytest.approx(float(f(tg.tensor(x1), tg.tensor(w))), rel=1e-14)
    np.testing.assert_allclose(gx, X.grad.numpy(), rtol=1e-12, atol=1e-12)
    _, hv = tg.autograd.functional.hvp(lambda x: f(x, tg.tensor(w)), tg.tensor(x1), tg.tensor(v))
    np.testing.assert_allclose(R.hvp((x1, w), v, argnums=0)[1], hv.numpy(), rtol=1e-10, atol=1e-12)
    c = tg.compile(f)
    for x in (x0, x1):
        t = tg.tensor(x, requires_grad=True)
        c(t, tg.tensor(w)).backward()
        want = tg.tensor(x, requires_grad=True)
        f(want, tg.tensor(w)).backward()
        np.testing.assert_allclose(t.grad.numpy(), want.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert c.stats.replays == 1


def test_lstsq_residuals_by_rank_are_not_recorded_for_replay():
    """With a driver other than gelsy and a tall A, lstsq returns residuals only where A has
    full rank: a choice made from A's values, so recording it for replay is refused (a
    replay at a rank-deficient A would have returned the recording's residuals)."""
    rng = np.random.default_rng(0)
    A0, B = rng.standard_normal((4, 2)), rng.standard_normal((4, 1))

    def f(A, B):
        return tg.linalg.lstsq(A, B, driver="gelsd").residuals.sum() + tg.linalg.lstsq(A, B).solution.sum()
    with pytest.raises(tg.NotReplayable, match="only where A has full rank"):
        tg.record(f, A0, B)
    A1 = np.array([[1.0, 2], [2, 4], [3, 6], [4, 8]])
    assert float(tg.linalg.lstsq(tg.tensor(A1), tg.tensor(B), driver="gelsd").residuals.sum()) == 0.0
    R = tg.record(lambda A, B: tg.linalg.lstsq(A, B).solution.sum(), A0, B)       # gelsy: no residuals
    assert R(A0 + 0.1, B) == pytest.approx(float(tg.linalg.lstsq(tg.tensor(A0 + 0.1), tg.tensor(B)).solution.sum()))
