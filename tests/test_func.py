"""tg.func (torch.func's grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian):
values against torch.func, against finite differences, composed transforms,
tg.compile'd functions inside them, and PyTorch's errors."""
import numpy as np
import pytest

import tapegrad as tg

try:
    import torch
    import torch.func as tfunc
except ImportError:
    torch = None

X = np.random.default_rng(0).standard_normal(4)
Y = np.random.default_rng(1).standard_normal(4)


def f(L, x, y):
    return (L.sin(x) * y).sum() + (x ** 3).sum() * y.sum()


def v(L, x):
    return L.tanh(x) * x.sum()


def _pairs(a, b):
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    assert len(a) == len(b)
    for p, q in zip(a, b):
        if isinstance(p, (tuple, list)):
            _pairs(p, q)
        else:
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-10, atol=1e-12)


# name -> call(L, F) with L the library (tg or torch) and F its func namespace
CASES = {
    "grad": lambda L, F, T: F.grad(lambda a, b: f(L, a, b))(T(X), T(Y)),
    "grad argnums": lambda L, F, T: F.grad(lambda a, b: f(L, a, b), argnums=(0, 1))(T(X), T(Y)),
    "grad argnum 1": lambda L, F, T: F.grad(lambda a, b: f(L, a, b), argnums=1)(T(X), T(Y)),
    "grad_and_value": lambda L, F, T: F.grad_and_value(lambda a, b: f(L, a, b))(T(X), T(Y)),
    "grad of grad": lambda L, F, T: F.grad(lambda a: F.grad(lambda b: (b ** 3).sin().sum())(a).sum())(T(X)),
    "grad has_aux": lambda L, F, T: F.grad(lambda a: (f(L, a, T(Y)), a * 2), has_aux=True)(T(X)),
    "jacrev": lambda L, F, T: F.jacrev(lambda a: v(L, a))(T(X)),
    "jacrev tuple out": lambda L, F, T: F.jacrev(lambda a: (a.sin(), a.sum()))(T(X)),
    "jacrev argnums": lambda L, F, T: F.jacrev(lambda a, b: a * b.sum(), argnums=(0, 1))(T(X), T(Y)),
    "jacfwd": lambda L, F, T: F.jacfwd(lambda a: v(L, a))(T(X)),
    "hessian": lambda L, F, T: F.hessian(lambda a, b: f(L, a, b))(T(X), T(Y)),
    "hessian argnums 1": lambda L, F, T: F.hessian(lambda a, b: f(L, a, b), argnums=1)(T(X), T(Y)),
    "jacfwd of jacrev": lambda L, F, T: F.jacfwd(F.jacrev(lambda a: f(L, a, T(Y))))(T(X)),
    "vjp": lambda L, F, T: F.vjp(lambda a: v(L, a), T(X))[1](T(Y)),
    "vjp two primals": lambda L, F, T: F.vjp(lambda a, b: a * b, T(X), T(Y))[1](T(X)),
    "jvp": lambda L, F, T: F.jvp(lambda a: v(L, a), (T(X),), (T(Y),)),
    "jvp has_aux": lambda L, F, T: F.jvp(lambda a: (v(L, a), a.sum()), (T(X),), (T(Y),), has_aux=True),
}


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch_func(name):
    call = CASES[name]
    _pairs(call(tg, tg.func, tg.tensor), call(torch, tfunc, torch.tensor))


def test_against_finite_differences():
    def s(x):
        return (tg.sin(x) * x).sum() + (x ** 4).sum()
    x = tg.tensor(X)
    g = tg.func.grad(s)(x).numpy()
    H = tg.func.hessian(s)(x).numpy()
    eps = 1e-6
    for i in range(4):
        e = np.zeros(4)
        e[i] = eps
        fd = (s(tg.tensor(X + e)).item() - s(tg.tensor(X - e)).item()) / (2 * eps)
        np.testing.assert_allclose(g[i], fd, rtol=1e-7)
        fdg = (tg.func.grad(s)(tg.tensor(X + e)).numpy() - tg.func.grad(s)(tg.tensor(X - e)).numpy()) / (2 * eps)
        np.testing.assert_allclose(H[:, i], fdg, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(H, H.T, atol=1e-12)
    # hessian is jacfwd(jacrev) and the Jacobian of the gradient
    np.testing.assert_allclose(tg.func.jacfwd(tg.func.jacrev(s))(x).numpy(), H, atol=1e-12)
    np.testing.assert_allclose(tg.func.jacrev(tg.func.grad(s))(x).numpy(), H, atol=1e-12)


def test_jvp_equals_jacobian_times_tangent_and_vjp_its_transpose():
    J = tg.func.jacrev(lambda a: v(tg, a))(tg.tensor(X)).numpy()
    _, jv = tg.func.jvp(lambda a: v(tg, a), (tg.tensor(X),), (tg.tensor(Y),))
    np.testing.assert_allclose(jv.numpy(), J @ Y, atol=1e-12)
    out, fn = tg.func.vjp(lambda a: v(tg, a), tg.tensor(X))
    np.testing.assert_allclose(fn(tg.tensor(Y))[0].numpy(), Y @ J, atol=1e-12)
    np.testing.assert_allclose(fn(tg.tensor(X))[0].numpy(), X @ J, atol=1e-12)     # (callable again)
    np.testing.assert_allclose(out.numpy(), v(np, X))


def test_results_follow_the_inputs_requires_grad():
    g = tg.func.grad(lambda a: (a ** 3).sum())(tg.tensor(X))
    assert not g.requires_grad
    x = tg.tensor(X, requires_grad=True)
    g = tg.func.grad(lambda a: (a ** 3).sum())(x)
    assert g.requires_grad
    g.sum().backward()                              # d/dx sum(3 x^2) = 6 x
    np.testing.assert_allclose(x.grad.numpy(), 6 * X)


def test_compiled_functions_inside_the_transforms():
    def loss(x):
        return (tg.sin(x) * x).sum()
    c = tg.compile(loss)
    for seed in range(3):
        x = tg.tensor(np.random.default_rng(seed).standard_normal(5))
        np.testing.assert_array_equal(tg.func.grad(c)(x).numpy(), tg.func.grad(loss)(x).numpy())
        np.testing.assert_allclose(tg.func.hessian(c)(x).numpy(), tg.func.hessian(loss)(x).numpy(), atol=1e-14)
    assert c.stats.replays >= 2


def test_errors():
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor, got tensor with 1 "
                                           "dims. Maybe you wanted to use the vjp or jacrev APIs instead"):
        tg.func.grad(lambda a: a * 2)(tg.tensor(X))
    with pytest.raises(RuntimeError, match="Got argnum=2, but only 1 positional inputs"):
        tg.func.grad(lambda a: a.sum(), argnums=2)(tg.tensor(X))
    with pytest.raises(RuntimeError, match="output of function f should be a tuple"):
        tg.func.grad(lambda a: a.sum(), has_aux=True)(tg.tensor(X))
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        tg.func.jvp(lambda a: a, tg.tensor(X), (tg.tensor(X),))
    with pytest.raises(RuntimeError, match="Expected primals and tangents to have the same shape"):
        tg.func.jvp(lambda a: a, (tg.tensor(X),), (tg.tensor(X[:2]),))
    if torch is not None:
        for call in (lambda F, T: F.grad(lambda a: a * 2)(T(X)),
                     lambda F, T: F.grad(lambda a: a.sum(), argnums=2)(T(X))):
            with pytest.raises(RuntimeError) as mine:
                call(tg.func, tg.tensor)
            with pytest.raises(RuntimeError) as theirs:
                call(tfunc, torch.tensor)
            assert str(mine.value) == str(theirs.value)


def test_named_tuple_outputs_keep_their_type():
    """A function returning a named tuple (slogdet's): jvp's output and tangent, vjp's
    output and the Jacobians are that named tuple, as torch.func's (it crashed)."""
    A = tg.tensor([[2.0, 1.0], [1.0, 3.0]])
    out, tan = tg.func.jvp(tg.linalg.slogdet, (A,), (tg.tensor(np.eye(2)),))
    assert type(out) is type(tan) is type(tg.linalg.slogdet(A))
    assert out.sign.item() == 1.0 and abs(out.logabsdet.item() - np.log(5.0)) < 1e-15
    assert tan.sign.item() == 0.0 and abs(tan.logabsdet.item() - 1.0) < 1e-15     # tr(A^-1 I) = 5 / 5
    for jac in (tg.func.jacrev, tg.func.jacfwd):
        J = jac(tg.linalg.slogdet)(A)
        assert type(J) is type(out)
        np.testing.assert_allclose(J.logabsdet.numpy(), [[0.6, -0.2], [-0.2, 0.4]], rtol=1e-14)   # A^-T
        np.testing.assert_array_equal(J.sign.numpy(), np.zeros((2, 2)))
    o, _ = tg.func.vjp(tg.linalg.slogdet, A)
    assert type(o) is type(out)
    torch = pytest.importorskip("torch")
    tA = torch.tensor(A.numpy())
    _, ttan = torch.func.jvp(torch.linalg.slogdet, (tA,), (torch.eye(2, dtype=torch.float64),))
    np.testing.assert_allclose(tan.logabsdet.item(), ttan.logabsdet.item(), rtol=1e-14)
    np.testing.assert_allclose(tg.func.jacrev(tg.linalg.slogdet)(A).logabsdet.numpy(),
                               torch.func.jacrev(torch.linalg.slogdet)(tA).logabsdet.numpy(), rtol=1e-14)
