"""Forward-mode rules of the host ops: linear algebra (solve, inv, det, slogdet, cholesky,
solve_triangular, cholesky_solve, eigh, vector_norm; tapegrad/linalg.py), the
fft transforms (tapegrad/fft.py) and a complex tensor's abs and angle (complex_tensor.py):
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
    "det": (lambda A: LA.det(A) * A.sum(), [_well_conditioned(3, 3)]),
    "det batched, squared": (lambda A: LA.det(A.sin() + 2 * tg.eye(3)) ** 2, [RNG.standard_normal((2, 3, 3))]),
    "eigvalsh": (lambda M: LA.eigvalsh(M @ M.mT) ** 2, [RNG.standard_normal((4, 4))]),
    "eigh, vectors and values": (lambda M: (LA.eigh(M + M.mT)[1] ** 2) * LA.eigh(M + M.mT)[0][..., None, :],
                                 [RNG.standard_normal((2, 3, 3))]),
    "eigh UPLO=U": (lambda M: LA.eigh(M + M.mT, UPLO="U")[1] ** 2 + LA.eigh(M + M.mT, UPLO="U")[0].exp(),
                    [RNG.standard_normal((4, 4))]),
    "vector_norm order 3 over a dim": (lambda x: LA.vector_norm(x, 3, dim=0) * x, [RNG.standard_normal((3, 4))]),
    "vector_norm order 1.5, keepdim": (lambda x: LA.vector_norm(x, 1.5, dim=1, keepdim=True) ** 2 * x,
                                       [RNG.standard_normal((3, 4))]),
    "vector_norm order 0.5 and -1": (lambda x: LA.vector_norm(x, 0.5) * x + LA.vector_norm(x.exp(), -1) * x.sin(),
                                     [RNG.standard_normal(5)]),
    "vector_norm orders 1, inf, -inf, 0": (
        lambda x: sum(LA.vector_norm(x, p, dim=-1) for p in (1, float("inf"), -float("inf"), 0))[..., None] * x.sin(),
        [RNG.standard_normal((2, 5))]),
    "x.norm(p=1) of a matrix, norm(ord=inf) of a vector": (
        lambda x: x.norm(p=1) * x + LA.norm(x[0], float("inf")) * x ** 2, [RNG.standard_normal((2, 3))]),
    "svdvals of a tall matrix": (lambda A: LA.svdvals(A.sin()) ** 3, [RNG.standard_normal((5, 3))]),
    "svdvals of wide matrices": (lambda A: LA.svdvals(A) * A.sum((-1, -2))[..., None],
                                 [RNG.standard_normal((2, 3, 5))]),
    "nuclear and spectral norms, square": (lambda A: LA.matrix_norm(A, "nuc") * A + LA.matrix_norm(A.exp(), 2),
                                           [RNG.standard_normal((4, 4))]),
    "svd full_matrices of a square matrix, S": (lambda A: LA.svd(A)[1].exp(), [RNG.standard_normal((3, 3))]),
    "matrix_exp": (lambda A: LA.matrix_exp(A) ** 2, [RNG.standard_normal((3, 3)) * 0.7]),
    "matrix_exp batched, of a function": (lambda A: LA.matrix_exp(A.sin() - A.mT) @ A,
                                          [RNG.standard_normal((2, 3, 3)) * 0.7]),
    "pinv of a tall matrix": (lambda A: LA.pinv(A) ** 2, [RNG.standard_normal((4, 3))]),
    "pinv of wide matrices": (lambda A: LA.pinv(A.exp()) @ A, [RNG.standard_normal((2, 2, 4))]),
    "pinv of a square matrix, hermitian": (lambda M: LA.pinv(M @ M.mT + tg.eye(3), hermitian=True).sin(),
                                           [RNG.standard_normal((3, 3))]),
    "qr of a tall matrix": (lambda A: LA.qr(A)[0] * LA.qr(A)[1].sum(0), [RNG.standard_normal((4, 3))]),
    "qr of wide matrices": (lambda A: LA.qr(A.sin())[1] ** 2 + LA.qr(A)[0].sum(), [RNG.standard_normal((2, 3, 5))]),
    "qr complete of a square matrix": (lambda A: LA.qr(A, mode="complete")[0] @ LA.qr(A, mode="complete")[1].exp(),
                                       [RNG.standard_normal((3, 3))]),
    "lu_factor": (lambda A: LA.lu_factor(A)[0] ** 2, [RNG.standard_normal((3, 3))]),
    "lu_factor batched": (lambda A: LA.lu_factor(A.sin() + 2 * tg.eye(3))[0].exp(), [RNG.standard_normal((2, 3, 3))]),
    "lu_factor and lu_solve": (lambda A, B: LA.lu_solve(*LA.lu_factor(A), B) ** 2,
                               [_well_conditioned(3, 3), RNG.standard_normal((3, 2))]),
    "lu_solve adjoint, right, batched": (
        lambda A, B: LA.lu_solve(*LA.lu_factor(A), B, left=False, adjoint=True).tanh(),
        [_well_conditioned(2, 3, 3), RNG.standard_normal((2, 2, 3))]),
    "lu_solve of B alone": (lambda B, F=LA.lu_factor(tg.tensor(_well_conditioned(3, 3))): LA.lu_solve(*F, B.sin()),
                            [RNG.standard_normal((3, 2))]),
    # the fft transforms (linear: no curvature of their own) and complex abs and angle
    "rfft, abs": (lambda x: tg.fft.rfft(x.sin()).abs() ** 2, [RNG.standard_normal(6)]),
    "rfft2 ortho, angle": (lambda x: tg.fft.rfft2(x * x, norm="ortho").angle(), [RNG.standard_normal((2, 4, 5))]),
    "fft of a real input, padded": (lambda x: tg.fft.fft(x.exp(), n=7).abs(), [RNG.standard_normal(5)]),
    "fftn forward norm, real part": (lambda x: tg.fft.fftn(x.tanh(), s=(3, 5), norm="forward").real * x[:3, :1],
                                     [RNG.standard_normal((4, 5))]),
    "ifft2 of complex, imag": (lambda a, b: tg.fft.ifft2(tg.complex(a, b.sin())).imag ** 2, [
        RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))]),
    "irfft over dim 0": (lambda x: tg.fft.irfft(tg.fft.rfft(x, dim=0), n=6, dim=0) ** 3, [RNG.standard_normal((5, 2))]),
    "irfftn, hfft, ihfft": (lambda x: tg.fft.irfftn(tg.fft.rfftn(x.sin()), s=(3, 4)).exp()
                            + tg.fft.hfft(tg.fft.ihfft(x[0]), n=4)[None], [RNG.standard_normal((3, 4))]),
    "real angle": (lambda x: tg.angle(x) * x, [np.array([-1.2, 0.7, -0.3, 2.0, 0.4])]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_host_op_forward_rules(name):
    f, xs = CASES[name]
    _check(f, xs)


# eig: its eigenvalues, and its eigenvectors in uses their phase does not change (|V|)
CASES.update({
    "eig values, complex pairs": (lambda A: LA.eigvals(A).real * LA.eigvals(A).imag + LA.eigvals(A).real ** 2,
                                  [RNG.standard_normal((4, 4))]),
    "eig vectors, abs": (lambda A: LA.eig(A)[1].abs() ** 2 * LA.eig(A)[0].real[..., None, :],
                         [RNG.standard_normal((4, 4))]),
    "eig batched, of a complex matrix": (lambda a, b: LA.eig(tg.complex(a, b.sin()))[1].abs() ** 3
                                         + LA.eigvals(tg.complex(a, b.sin())).imag[..., None],
                                         [RNG.standard_normal((2, 3, 3)), RNG.standard_normal((2, 3, 3))]),
})


@pytest.mark.parametrize("name", [n for n in sorted(CASES) if n.startswith("eig ")])
def test_eig(name):
    f, xs = CASES[name]
    _check(f, xs)


def test_eig_against_pytorch():
    """eig's tangents (values and vectors, as ``torch.func.jvp`` gives them: unit-norm
    vectors whose phase does not turn), and the Hessian of a loss of both, real and complex
    input, against PyTorch; a loss that depends on the vectors' phase raises PyTorch's
    error on the reverse passes (Jacobian, Hessian) as in a backward."""
    torch = pytest.importorskip("torch")
    A0, dA = RNG.standard_normal((4, 4)), RNG.standard_normal((4, 4))
    assert np.abs(np.linalg.eigvals(A0).imag).max() > 0.1      # (a complex pair)

    def parts(A):
        L, V = tg.linalg.eig(A)
        return L.real, L.imag, V.real, V.imag
    ins = (tg.tensor(A0, requires_grad=True),)
    assert Fn._on_tape(Fn._jvp_on_tape, ins, parts(*ins), (tg.tensor(dA),)) is not None
    (Lr, Li, Vr, Vi), (dLr, dLi, dVr, dVi) = Fn.jvp(parts, tg.tensor(A0), tg.tensor(dA))
    (L, V), (dL, dV) = torch.func.jvp(torch.linalg.eig, (torch.tensor(A0),), (torch.tensor(dA),))
    L, V, dL, dV = L.numpy(), V.numpy(), dL.numpy(), dV.numpy()
    np.testing.assert_allclose(Lr.numpy() + 1j * Li.numpy(), L, rtol=1e-12)
    np.testing.assert_allclose(dLr.numpy() + 1j * dLi.numpy(), dL, rtol=1e-10, atol=1e-12)
    # each vector up to a phase (LAPACK's builds may differ): the tangent turns with it
    Vo = Vr.numpy() + 1j * Vi.numpy()
    at = np.abs(Vo).argmax(0)
    phase = V[at, range(4)] / Vo[at, range(4)]
    np.testing.assert_allclose(np.abs(phase), 1, rtol=1e-12)
    np.testing.assert_allclose(Vo * phase, V, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose((dVr.numpy() + 1j * dVi.numpy()) * phase, dV, rtol=1e-10, atol=1e-12)

    W = RNG.standard_normal((4, 4))

    def loss(x, lib=tg):
        L, V = lib.linalg.eig(x.reshape(4, 4))
        return (L.real ** 3).sum() + (L.imag ** 2).sum() + ((V.abs() ** 2) * lib.tensor(W)).sum()
    ins = (tg.tensor(A0.ravel(), requires_grad=True),)
    assert Fn._on_tape(Fn._hessian_on_tape, ins, loss(*ins)) is not None
    H = Fn.hessian(loss, tg.tensor(A0.ravel())).numpy()
    want = torch.autograd.functional.hessian(lambda x: loss(x, torch), torch.tensor(A0.ravel())).numpy()
    np.testing.assert_allclose(H, want, rtol=1e-9, atol=1e-10)
    # the same through a recorded tape (at the recording's point and another) and tg.func
    tape = tg.record(loss, A0.ravel())
    np.testing.assert_allclose(tape.hessian(A0.ravel()), want, rtol=1e-9, atol=1e-10)
    v = RNG.standard_normal(16)
    np.testing.assert_allclose(tape.hvp(A0.ravel(), v)[1], want @ v, rtol=1e-9, atol=1e-10)
    A1 = A0.ravel() + 0.01 * RNG.standard_normal(16)
    want1 = torch.autograd.functional.hessian(lambda x: loss(x, torch), torch.tensor(A1)).numpy()
    np.testing.assert_allclose(tape.hessian(A1), want1, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(tg.func.jacfwd(tg.func.jacrev(loss))(tg.tensor(A0.ravel())).numpy(), want,
                               rtol=1e-9, atol=1e-10)

    Ar, Ai = RNG.standard_normal((2, 3, 3)), RNG.standard_normal((2, 3, 3))

    def complex_loss(a, b, lib=tg):
        L, V = lib.linalg.eig(lib.complex(a, b))
        return (L.real ** 2 * L.imag).sum() + (V.abs() ** 3).sum()
    ins = (tg.tensor(Ar, requires_grad=True), tg.tensor(Ai, requires_grad=True))
    assert Fn._on_tape(Fn._hessian_on_tape, ins, complex_loss(*ins)) is not None
    H = Fn.hessian(complex_loss, (tg.tensor(Ar), tg.tensor(Ai)))
    want = torch.autograd.functional.hessian(lambda a, b: complex_loss(a, b, torch),
                                             (torch.tensor(Ar), torch.tensor(Ai)))
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(H[i][j].numpy(), want[i][j].numpy(), rtol=1e-9, atol=1e-10)

    def vectors(A, lib=tg):
        return lib.linalg.eig(A)[1].real
    for call in (lambda: Fn.jacobian(vectors, tg.tensor(A0)),
                 lambda: Fn.hessian(lambda x: vectors(x.reshape(4, 4)).sum(), tg.tensor(A0.ravel())),
                 lambda: torch.autograd.functional.jacobian(lambda A: vectors(A, torch), torch.tensor(A0))):
        with pytest.raises(RuntimeError, match="specified up to multiplication by e"):
            call()
    # (forward mode raises nothing, in PyTorch neither: the tangents of the real parts of V)
    J = Fn.jacobian(vectors, tg.tensor(A0), strategy="forward-mode", vectorize=True).numpy()
    np.testing.assert_allclose(np.einsum("ijkl,kl->ij", J, dA), dVr.numpy(), rtol=1e-10, atol=1e-12)


# svd's U and Vh, in sign-invariant uses
CASES.update({
    "svd vectors, tall": (lambda A: (LA.svd(A, full_matrices=False)[0] ** 2) * LA.svd(A, full_matrices=False)[1],
                          [RNG.standard_normal((5, 3))]),
    "svd vectors, wide": (lambda A: (LA.svd(A, full_matrices=False)[2] ** 2).sum(-2) * A[..., 0, :],
                          [RNG.standard_normal((2, 3, 5))]),
    "svd vectors, square full": (lambda A: LA.svd(A)[0] ** 2 + LA.svd(A)[2].mT ** 2, [RNG.standard_normal((3, 3))]),
})


@pytest.mark.parametrize("name", [n for n in sorted(CASES) if n.startswith("svd vectors")])
def test_svd_vectors(name):
    f, xs = CASES[name]
    _check(f, xs)


@pytest.mark.parametrize("name", ["rfft, abs", "rfft2 ortho, angle", "irfft over dim 0", "ifft2 of complex, imag",
                                  "slogdet batched", "cholesky", "det batched, squared", "eigh, vectors and values",
                                  "svdvals of a tall matrix", "svd vectors, tall", "svd vectors, wide",
                                  "svd vectors, square full", "matrix_exp batched, of a function",
                                  "pinv of a tall matrix", "pinv of wide matrices", "qr of a tall matrix",
                                  "qr of wide matrices", "lu_factor batched", "lu_factor and lu_solve"])
def test_jacobian_by_batched_reverse(name):
    """The Jacobian with every output row at once (each op's batched reverse) and with
    every input direction at once (its tangent), against central differences."""
    f, xs = CASES[name]
    f1 = (lambda x: f(x)) if len(xs) == 1 else (lambda x, rest=[tg.tensor(v) for v in xs[1:]]: f(x, *rest))
    x0 = xs[0]
    ins = (tg.tensor(x0, requires_grad=True),)
    for forward in (False, True):
        J = Fn._on_tape(Fn._jacobian_on_tape, ins, (f1(*ins),), forward)
        assert J is not None, "took the reverse-mode fallback"
        J = J[0][0].numpy().reshape(-1, x0.size)
        fd = np.stack([(f1(tg.tensor(x0 + EPS * e)).numpy() - f1(tg.tensor(x0 - EPS * e)).numpy()).reshape(-1)
                       / (2 * EPS) for e in np.eye(x0.size).reshape((x0.size,) + x0.shape)], 1)
        np.testing.assert_allclose(J, fd, rtol=1e-5, atol=1e-6)


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
    """A tg.autograd.Function has no forward-mode rule, nor svd with
    full_matrices of a matrix that is not square (as in PyTorch), nor qr in complete mode of
    a tall matrix: the functional API falls back to the reverse-mode path, with the right
    values (or, for that qr, PyTorch's error)."""
    x0 = RNG.standard_normal(3)

    def qr(x):      # (complete of a tall matrix: no derivative either way)
        return LA.qr(tg.outer(x, x[:2]) + 1, mode="complete")[1].sum()
    ins = (tg.tensor(x0, requires_grad=True),)
    assert Fn._on_tape(Fn._hvp_on_tape, ins, (qr(*ins),), (tg.tensor(x0),)) is None
    with pytest.raises(RuntimeError, match="not differentiable when mode='complete' and nrows > ncols"):
        Fn.hvp(qr, tg.tensor(x0), tg.tensor(x0))

    class Square(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            return 2 * g * ctx.saved_tensors[0]

    def function(x):
        return (Square.apply(x.sin()) * x).sum()

    def svd_full(x):
        return (LA.svd(tg.outer(x, x[:2].exp()) + tg.ones(3, 2))[1] ** 3).sum()
    for f in (function, svd_full):
        ins = (tg.tensor(x0, requires_grad=True),)
        assert Fn._on_tape(Fn._hvp_on_tape, ins, (f(*ins),), (tg.tensor(x0),)) is None
        _, hv = Fn.hvp(f, tg.tensor(x0), tg.tensor(np.ones(3)))
        fd = (_grad(f, [x0 + EPS])[0] - _grad(f, [x0 - EPS])[0]) / (2 * EPS)
        np.testing.assert_allclose(hv.numpy(), fd, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["cholesky", "eigh"])
def test_tangent_of_a_nonsymmetric_direction_matches_its_reverse(op):
    """The reverse rule's gradient is symmetric (PyTorch's): the tangent takes a direction's
    symmetric part, so that u . J v == J^T u . v for any v, not only symmetric ones."""
    def f(A):
        return LA.cholesky(A) if op == "cholesky" else LA.eigh(A)[1] * LA.eigh(A)[0]
    M = RNG.standard_normal((3, 3))
    A0, V = M @ M.T + np.eye(3), RNG.standard_normal((3, 3))
    assert np.abs(V - V.T).max() > 0.1
    _, (jv,) = _forward_path(Fn._jvp_on_tape, f, [A0], [V])
    u = RNG.standard_normal((3, 3))
    _, vj = Fn.vjp(f, tg.tensor(A0), tg.tensor(u))
    np.testing.assert_allclose(float((u * jv.numpy()).sum()), float((vj.numpy() * V).sum()), rtol=1e-12)
    _, (jv_sym,) = _forward_path(Fn._jvp_on_tape, f, [A0], [(V + V.T) / 2])
    np.testing.assert_allclose(jv.numpy(), jv_sym.numpy(), rtol=1e-13, atol=1e-13)


def test_spectral_objective_hessian_against_pytorch():
    """A spectral objective (rfft, abs, angle, irfft): the Hessian by the forward path,
    against PyTorch's, and at a point where a bin is exactly zero (abs and angle have
    PyTorch's zero gradient there) against the double backward."""
    torch = pytest.importorskip("torch")
    w = RNG.standard_normal(5)

    def f(x, lib=tg):
        z = lib.fft.rfft(x * x.sin(), norm="ortho")
        return (z.abs() ** 3 * lib.tensor(w)).sum() + (z.angle() * lib.tensor(w)).sum() \
            + (lib.fft.irfft(z * z, n=8) ** 2).sum()
    x0 = RNG.standard_normal(8)
    ins = (tg.tensor(x0, requires_grad=True),)
    assert Fn._on_tape(Fn._hessian_on_tape, ins, f(*ins)) is not None
    H = Fn.hessian(f, tg.tensor(x0)).numpy()
    want = torch.autograd.functional.hessian(lambda x: f(x, torch), torch.tensor(x0)).numpy()
    np.testing.assert_allclose(H, want, rtol=1e-9, atol=1e-10)

    def at_zero(a, b):      # bin 0 is exactly 0 + 0i
        z = tg.complex(a * tg.tensor([0.0, 1, 1]), b * tg.tensor([0.0, 1, 1]))
        return (z.abs() ** 3).sum() + (z.angle() * a).sum()
    a0, b0, va, vb = (RNG.standard_normal(3) for _ in range(4))
    _, hv = _forward_path(Fn._hvp_on_tape, at_zero, [a0, b0], [va, vb])
    zs = [tg.tensor(a0, requires_grad=True), tg.tensor(b0, requires_grad=True)]
    g = tg.autograd.grad(at_zero(*zs), zs, create_graph=True)
    dd = tg.autograd.grad(g, zs, grad_outputs=[tg.tensor(va), tg.tensor(vb)])
    for h, d in zip(hv, dd):
        assert np.isfinite(h.numpy()).all()
        np.testing.assert_allclose(h.numpy(), d.numpy(), rtol=1e-12, atol=1e-12)


def test_det_of_a_singular_matrix_takes_the_reverse_path():
    """det's forward-mode rules need A^-1: at a singular A the walk takes the reverse-mode
    path (the reverse's cofactors from an SVD), with the double backward's values."""
    def f(x):
        A = x.reshape(3, 3) * tg.tensor([[1.0, 1, 1], [1, 1, 1], [0, 0, 0]])     # a zero row
        return LA.det(A + tg.diag(tg.tensor([0.0, 0, 0]))) * x.sum() + (x ** 3).sum()
    x0, v = RNG.standard_normal(9), RNG.standard_normal(9)
    ins = (tg.tensor(x0, requires_grad=True),)
    assert Fn._on_tape(Fn._hvp_on_tape, ins, (f(*ins),), (tg.tensor(v),)) is None
    _, hv = Fn.hvp(f, tg.tensor(x0), tg.tensor(v))
    z = tg.tensor(x0, requires_grad=True)
    g, = tg.autograd.grad(f(z), z, create_graph=True)
    want, = tg.autograd.grad(g, z, grad_outputs=tg.tensor(v))
    np.testing.assert_allclose(hv.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    fd = (_grad(f, [x0 + EPS * v])[0] - _grad(f, [x0 - EPS * v])[0]) / (2 * EPS)
    np.testing.assert_allclose(hv.numpy(), fd, rtol=1e-4, atol=1e-5)


def test_eigh_and_det_hessian_against_pytorch():
    """The Hessian of an objective of eigenvalues, eigenvectors and a determinant by
    the forward path, against PyTorch's."""
    torch = pytest.importorskip("torch")
    M = RNG.standard_normal((4, 4))
    A0, B0, u = M + M.T, _well_conditioned(4, 4), RNG.standard_normal(4)

    def f(x, lib=tg):
        L, V = lib.linalg.eigh(lib.tensor(A0) + lib.diag(x.sin()))
        return (L ** 3).sum() + ((V ** 2) @ lib.tensor(u)).sum() * L[0] + lib.linalg.det(lib.tensor(B0) + lib.diag(x))
    x0 = RNG.standard_normal(4) * 0.5
    ins = (tg.tensor(x0, requires_grad=True),)
    assert Fn._on_tape(Fn._hessian_on_tape, ins, f(*ins)) is not None
    H = Fn.hessian(f, tg.tensor(x0)).numpy()
    want = torch.autograd.functional.hessian(lambda x: f(x, torch), torch.tensor(x0), vectorize=True).numpy()
    np.testing.assert_allclose(H, want, rtol=1e-9, atol=1e-10)


def test_norms_at_zeros_and_ties_agree_with_the_reverse():
    """At exact zeros (orders 0.5, 1, 3) and ties of the extrema (+-inf share among
    them), the forward rules give the reverse rule's gradient and the double
    backward's H v."""
    x0 = np.array([2.0, -2.0, 0.0, 1.0, -0.5])
    v = RNG.standard_normal(5)

    def f(x):
        return (LA.vector_norm(x, 0.5) * x[3] + LA.vector_norm(x, 1) * x[4] + LA.vector_norm(x, 3) ** 2
                + LA.vector_norm(x, float("inf")) * x.sum() + LA.vector_norm(x, -float("inf")) * x[0])
    z = tg.tensor(x0, requires_grad=True)
    g, = tg.autograd.grad(f(z), z, create_graph=True)
    want, = tg.autograd.grad(g, z, grad_outputs=tg.tensor(v))
    _, (jv,) = _forward_path(Fn._jvp_on_tape, f, [x0], [v])
    np.testing.assert_allclose(float(jv.numpy()), float(g.detach().numpy() @ v), rtol=1e-12)
    _, (hv,) = _forward_path(Fn._hvp_on_tape, f, [x0], [v])
    assert np.isfinite(hv.numpy()).all()
    np.testing.assert_allclose(hv.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_repeated_eigenvalues_give_what_the_double_backward_gives():
    """At a repeated eigenvalue the second derivative through eigh's vectors (or through
    the eigenvalues' curvature) is not defined: the forward path gives nan, as the double
    backward (and PyTorch), never some finite number; first order stays finite."""
    w = tg.tensor(np.arange(9.0).reshape(3, 3))

    def f(x):
        L, V = LA.eigh(tg.diag(x + tg.tensor([1.0, 1.0, 2.0])))
        return (V ** 2 * w).sum() + (L ** 3).sum()

    def values(x):
        return (LA.eigvalsh(tg.diag(x + tg.tensor([1.0, 1.0, 2.0]))) ** 3).sum()
    x0, v = np.zeros(3), np.ones(3)
    with np.errstate(all="ignore"):
        for fn in (f, values):
            _, (hv,) = _forward_path(Fn._hvp_on_tape, fn, [x0], [v])
            z = tg.tensor(x0, requires_grad=True)
            g, = tg.autograd.grad(fn(z), z, create_graph=True)
            dd, = tg.autograd.grad(g, z, grad_outputs=tg.tensor(v))
            assert np.isnan(hv.numpy()).all() and np.isnan(dd.numpy()).all()
        _, (jv,) = _forward_path(Fn._jvp_on_tape, values, [x0], [v])
        assert float(jv.numpy()) == pytest.approx(3 * (1 + 1 + 4))
