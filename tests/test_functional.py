"""tapegrad.autograd.functional (vjp, jvp, jacobian, hessian, hvp, vhp) against closed forms,
against each other, and (when torch is importable) against torch.autograd.functional."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import functional as F

A = [[2.0, 1.0], [1.0, 3.0]]
B = [[1.0, 2.0], [0.0, 1.0]]


def quad(x):
    return 0.5 * x @ tg.tensor(A) @ x


def arr(t):
    return np.asarray(t.detach().numpy())


def close(t, expected, **kw):
    np.testing.assert_allclose(arr(t), np.asarray(expected, dtype=np.float64), rtol=1e-10, atol=1e-12, **kw)


# -- quadratic forms -----------------------------------------------------------------------
def test_hessian_of_quadratic_is_A():
    H = F.hessian(quad, tg.tensor([1.0, 2.0]))
    assert isinstance(H, tg.Tensor) and H.shape == (2, 2) and not H.requires_grad
    close(H, A)


def test_hessian_of_nonsymmetric_form_is_symmetrised():
    H = F.hessian(lambda x: x @ tg.tensor(B) @ x, tg.tensor([1.0, 2.0]))
    close(H, [[2.0, 2.0], [2.0, 2.0]])


def test_hvp_and_vhp_of_quadratic():
    x, v = tg.tensor([1.0, 2.0]), tg.tensor([1.0, -1.0])
    for fn in (F.hvp, F.vhp):
        out, res = fn(quad, x, v=v)
        assert out.shape == () and out.item() == pytest.approx(9.0)
        close(res, [1.0, -2.0])
        assert not out.requires_grad and not res.requires_grad


def test_hvp_vhp_nonsymmetric_hessian_still_symmetric():
    # the Hessian of x^T B x is B + B^T, so H v and v^T H agree
    x, v = tg.tensor([0.5, -1.5]), tg.tensor([3.0, 1.0])
    _, h = F.hvp(lambda x: x @ tg.tensor(B) @ x, x, v)
    _, vh = F.vhp(lambda x: x @ tg.tensor(B) @ x, x, v)
    close(h, [8.0, 8.0])
    close(vh, [8.0, 8.0])


# -- jacobian structure and values ---------------------------------------------------------
def test_jacobian_elementwise_is_diagonal():
    xs = [0.3, -1.2, 2.0]
    J = F.jacobian(lambda x: x.sin() * x, tg.tensor(xs))
    assert J.shape == (3, 3) and not J.requires_grad
    x = np.array(xs)
    close(J, np.diag(np.cos(x) * x + np.sin(x)))


def test_jacobian_matrix_input_shape():
    x = tg.tensor([[1.0, 2.0], [3.0, 4.0]])
    J = F.jacobian(lambda x: x.exp().sum(1), x)
    assert J.shape == (2, 2, 2)
    e = np.exp(np.array([[1.0, 2.0], [3.0, 4.0]]))
    close(J, [[[e[0, 0], e[0, 1]], [0, 0]], [[0, 0], [e[1, 0], e[1, 1]]]])


def two_by_two(x, y):
    return x * y, (x ** 2).sum() + y[0]


def test_jacobian_tuple_in_tuple_out_structure():
    x, y = tg.tensor([1.0, 2.0, 3.0]), tg.tensor([4.0, 5.0, 6.0])
    J = F.jacobian(two_by_two, (x, y))
    assert isinstance(J, tuple) and len(J) == 2
    assert all(isinstance(row, tuple) and len(row) == 2 for row in J)
    assert [[b.shape for b in row] for row in J] == [[(3, 3), (3, 3)], [(3,), (3,)]]
    close(J[0][0], np.diag([4.0, 5.0, 6.0]))
    close(J[0][1], np.diag([1.0, 2.0, 3.0]))
    close(J[1][0], [2.0, 4.0, 6.0])
    close(J[1][1], [1.0, 0.0, 0.0])


def test_jacobian_mixed_structures():
    x, y = tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0])
    # tuple in, single out: a tuple over inputs
    J = F.jacobian(lambda x, y: x * y, (x, y))
    assert isinstance(J, tuple) and len(J) == 2
    close(J[0], np.diag([3.0, 4.0]))
    close(J[1], np.diag([1.0, 2.0]))
    # single in, tuple out: a tuple over outputs
    J = F.jacobian(lambda x: (2 * x, x.sum()), x)
    assert isinstance(J, tuple) and len(J) == 2
    close(J[0], 2 * np.eye(2))
    close(J[1], [1.0, 1.0])


def test_jacobian_unused_input_gives_zeros():
    J = F.jacobian(lambda x, y: 3 * x, (tg.tensor([1.0, 2.0]), tg.tensor([5.0])))
    close(J[0], 3 * np.eye(2))
    close(J[1], [[0.0], [0.0]])


# -- jvp / vjp against the jacobian --------------------------------------------------------
def nonlinear(x):
    return (x[:2] * x[1:]).tanh() + x[0].exp() * x[1:]


def test_jvp_equals_J_v():
    x, v = tg.tensor([0.3, -0.7, 1.1]), tg.tensor([1.0, 2.0, -0.5])
    J = arr(F.jacobian(nonlinear, x))
    out, jv = F.jvp(nonlinear, x, v)
    close(out, arr(nonlinear(x)))
    assert jv.shape == (2,) and not jv.requires_grad
    close(jv, J @ arr(v))
    # and against a hand-written Jacobian
    a, b, c = arr(x)
    s1, s2 = 1 - np.tanh(a * b) ** 2, 1 - np.tanh(b * c) ** 2
    J_hand = np.array([[b * s1 + np.exp(a) * b, a * s1 + np.exp(a), 0.0],
                       [np.exp(a) * c, c * s2, b * s2 + np.exp(a)]])
    close(jv, J_hand @ arr(v))


def test_vjp_equals_v_J():
    x, v = tg.tensor([0.3, -0.7, 1.1]), tg.tensor([2.0, -3.0])
    J = arr(F.jacobian(nonlinear, x))
    out, vj = F.vjp(nonlinear, x, v)
    close(out, arr(nonlinear(x)))
    assert vj.shape == (3,) and not vj.requires_grad
    close(vj, arr(v) @ J)


def test_vjp_jvp_tuple_inputs():
    x, y = tg.tensor([1.0, 2.0, 3.0]), tg.tensor([4.0, 5.0, 6.0])
    vx, vy = tg.tensor([1.0, 0.0, -1.0]), tg.tensor([0.5, 0.5, 0.5])
    out, (jv0, jv1) = F.jvp(two_by_two, (x, y), (vx, vy))
    close(out[0], [4.0, 10.0, 18.0])
    close(out[1], 18.0)
    close(jv0, [4 * 1 + 1 * 0.5, 0 + 2 * 0.5, -6 + 3 * 0.5])
    close(jv1, 2 * 1 - 6 + 0.5)
    out, (gx, gy) = F.vjp(two_by_two, (x, y), (tg.tensor([1.0, 1.0, 1.0]), tg.tensor(2.0)))
    close(gx, [4 + 4.0, 5 + 8.0, 6 + 12.0])
    close(gy, [1 + 2.0, 2.0, 3.0])


def test_scalar_defaults_for_v():
    out, g = F.vjp(lambda x: (x ** 3).sum(), tg.tensor([2.0]))
    close(out, 8.0)
    close(g, [12.0])
    _, d = F.jvp(lambda x: x ** 3, tg.tensor(2.0))
    close(d, 12.0)
    _, h = F.hvp(lambda x: x ** 3, tg.tensor(2.0))
    close(h, 12.0)
    _, h = F.vhp(lambda x: x ** 3, tg.tensor(2.0))
    close(h, 12.0)


# -- Rosenbrock ----------------------------------------------------------------------------
def rosenbrock(x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def rosenbrock_hessian(x):
    n = len(x)
    H = np.zeros((n, n))
    for i in range(n - 1):
        # the term 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2
        H[i, i] += 1200 * x[i] ** 2 - 400 * x[i + 1] + 2
        H[i, i + 1] += -400 * x[i]
        H[i + 1, i] += -400 * x[i]
        H[i + 1, i + 1] += 200
    return H


def test_rosenbrock_hessian_closed_form():
    xs = np.array([-1.2, 1.0, 0.5, 2.0, -0.3])
    H = F.hessian(rosenbrock, tg.tensor(xs))
    assert H.shape == (5, 5)
    np.testing.assert_allclose(arr(H), rosenbrock_hessian(xs), rtol=1e-12, atol=1e-9)
    v = np.array([1.0, -2.0, 0.5, 0.0, 3.0])
    for fn in (F.hvp, F.vhp):
        out, hv = fn(rosenbrock, tg.tensor(xs), tg.tensor(v))
        expected_f = np.sum(100 * (xs[1:] - xs[:-1] ** 2) ** 2 + (1 - xs[:-1]) ** 2)
        assert out.item() == pytest.approx(expected_f, rel=1e-12)
        np.testing.assert_allclose(arr(hv), rosenbrock_hessian(xs) @ v, rtol=1e-12, atol=1e-9)


def test_hessian_tuple_inputs_structure():
    def f(x, y):
        return (2 * x ** 2).sum() * y.sum() + (3 * y ** 2).sum()
    x, y = tg.tensor([1.0, 2.0]), tg.tensor([0.5, -1.0, 2.0])
    H = F.hessian(f, (x, y))
    assert [[b.shape for b in row] for row in H] == [[(2, 2), (2, 3)], [(3, 2), (3, 3)]]
    close(H[0][0], 4 * 1.5 * np.eye(2))
    close(H[0][1], [[4.0] * 3, [8.0] * 3])
    close(H[1][0], [[4.0, 8.0]] * 3)
    close(H[1][1], 6 * np.eye(3))


# -- create_graph=True ---------------------------------------------------------------------
def test_create_graph_third_derivative_of_x4():
    x = tg.tensor(1.5, requires_grad=True)
    H = F.hessian(lambda t: t ** 4, x, create_graph=True)
    assert H.requires_grad
    close(H, 12 * 1.5 ** 2)
    (d3,) = tg.autograd.grad(H, x)
    close(d3, 24 * 1.5)


def test_create_graph_all_functions_differentiable_again():
    x = tg.tensor([0.5, -1.0], requires_grad=True)
    v = tg.tensor([1.0, 2.0])

    def cube(t):
        return (t ** 3).sum()
    out, g = F.vjp(cube, x, create_graph=True)
    assert out.requires_grad and g.requires_grad
    (gg,) = tg.autograd.grad(g.sum(), x)                # d/dx sum(3 x^2) = 6 x
    close(gg, [3.0, -6.0])
    out, jv = F.jvp(lambda t: t ** 3, x, v, create_graph=True)
    assert jv.requires_grad
    (gj,) = tg.autograd.grad(jv.sum(), x)               # d/dx sum(3 x^2 v) = 6 x v
    close(gj, [3.0, -12.0])
    J = F.jacobian(lambda t: t ** 3, x, create_graph=True)
    assert J.requires_grad
    (gJ,) = tg.autograd.grad(J.sum(), x)
    close(gJ, [3.0, -6.0])
    for fn in (F.hvp, F.vhp):
        out, hv = fn(cube, x, v, create_graph=True)     # 6 x v, then d/dx = 6 v
        assert hv.requires_grad
        close(hv, [3.0, -12.0])
        (gh,) = tg.autograd.grad(hv.sum(), x)
        close(gh, [6.0, 12.0])


def test_inputs_are_not_modified_and_results_detached():
    x = tg.tensor([1.0, 2.0])
    F.hessian(quad, x)
    assert not x.requires_grad and x.grad is None
    y = tg.tensor([1.0, 2.0], requires_grad=True)
    out, g = F.vjp(lambda t: (t * t).sum(), y)
    assert y.grad is None and not g.requires_grad and not out.requires_grad
    close(g, [2.0, 4.0])


def test_captured_input_is_a_constant():
    # the function closes over the very tensor passed as input: the capture is not the argument
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    J = F.jacobian(lambda t: t * x, x)
    close(J, np.diag([1.0, 2.0]))
    # with create_graph=True the argument is a differentiable copy, still distinct from the capture
    J = F.jacobian(lambda t: t * x, x, create_graph=True)
    assert J.requires_grad
    close(J, np.diag([1.0, 2.0]))
    (g,) = tg.autograd.grad(J.sum(), x)     # J = diag(x) as a function of x
    close(g, [1.0, 1.0])


# -- errors --------------------------------------------------------------------------------
V_NONE_OUT = ("The vector v can only be None if the user-provided function returns a single Tensor with a "
              "single element.")
V_NONE_IN = ("The vector v can only be None if the input to the user-provided function is a single Tensor "
             "with a single element.")
INDEP_BACK = "The output of the user-provided function is independent of input 1. This is not allowed in strict mode."
INDEP_JAC = "Output 0 of the user-provided function is independent of input 1. This is not allowed in strict mode."
NO_RG = ("Output 0 of the user-provided function does not require gradients. The outputs must be computed in a "
         "differentiable manner from the input when running in strict mode.")
LINEAR_HESS = ("While computing the hessian, found that the jacobian of the user-provided function with respect "
               "to input 0 is independent of the input. This is not allowed in strict mode. You should ensure "
               "that your function is twice differentiable and that the jacobian depends on the inputs (this "
               "would be violated by a linear function for example).")


def _raises(msg, fn, *args, exc=RuntimeError, **kw):
    with pytest.raises(exc) as info:
        fn(*args, **kw)
    assert str(info.value) == msg
    return info


def test_v_none_errors():
    x = tg.tensor([1.0, 2.0])
    _raises(V_NONE_OUT, F.vjp, lambda t: t * 2, x)
    _raises(V_NONE_IN, F.jvp, lambda t: t.sum(), x)
    _raises(V_NONE_IN, F.hvp, lambda t: t.sum(), x)
    _raises(V_NONE_IN, F.vhp, lambda t: t.sum(), x)


def test_strict_errors():
    x, y = tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0])
    _raises(INDEP_BACK, F.vjp, lambda a, b: a * 2, (x, y), tg.tensor([1.0, 1.0]), strict=True)
    _raises(INDEP_JAC, F.jacobian, lambda a, b: a * 2, (x, y), strict=True)
    _raises(NO_RG, F.jacobian, lambda a: tg.ones(2), x, strict=True)
    _raises(NO_RG, F.vjp, lambda a: tg.ones(2), x, tg.ones(2), strict=True)
    _raises(LINEAR_HESS, F.hessian, lambda a: (2 * a).sum(), x, strict=True)
    # non-strict: zeros where strict raises
    close(F.vjp(lambda a, b: a * 2, (x, y), tg.tensor([1.0, 1.0]))[1][1], [0.0, 0.0])
    close(F.hessian(lambda a: (2 * a).sum(), x), np.zeros((2, 2)))


def test_validation_errors():
    x = tg.tensor([1.0, 2.0])
    _raises("v has invalid size: should be torch.Size([2]) but got torch.Size([3]).",
            F.vjp, lambda t: t * 2, x, tg.ones(3))
    _raises("Entry 1 in v has invalid size: should be torch.Size([2]) but got torch.Size([1]).",
            F.jvp, lambda a, b: a * b, (x, x), (tg.ones(2), tg.ones(1)))
    _raises("v is a tuple of invalid length: should be 2 but got 1.", F.jvp, lambda a, b: a * b, (x, x), (x,))
    _raises("The given v should contain a single Tensor.", F.jvp, lambda a: a, x, (x, x))
    _raises("The function given to hessian should return a single Tensor", F.hessian, lambda a: (a.sum(),), x)
    _raises("The Tensor returned by the function given to vhp should contain a single element",
            F.vhp, lambda a: a * 2, x, x)
    _raises("The inputs given to jacobian must be either a Tensor or a tuple of Tensors but the value at "
            "index 1 has type <class 'int'>.", F.jacobian, lambda a, b: a, (x, 3), exc=TypeError)
    # forward mode is accepted, and gives the reverse mode's Jacobian
    np.testing.assert_array_equal(F.jacobian(lambda a: a.sin() * a[0], x, strategy="forward-mode").numpy(),
                                  F.jacobian(lambda a: a.sin() * a[0], x).numpy())
    with pytest.raises(AssertionError):
        F.jacobian(lambda a: a, x, strategy="sideways")


def test_vectorize_accepted():
    x = tg.tensor([0.3, -0.7, 1.1])
    close(F.jacobian(nonlinear, x, vectorize=True), arr(F.jacobian(nonlinear, x)))
    close(F.hessian(rosenbrock, x, vectorize=True), rosenbrock_hessian(arr(x)))


# -- against torch.autograd.functional -----------------------------------------------------
def _funcs():
    rng = np.random.default_rng(0)
    W = rng.standard_normal((3, 2))

    def f_single(lib, x):                       # R^3 -> R^2
        return (x.sin() * x.exp()) @ lib.tensor(W) + x[0] * x[1:]

    def f_tuple(lib, x, y):                     # (R^3, R^2x2) -> (R^2x2, scalar)
        return x[:2].tanh() * y + y.exp() * x[2], (x ** 2).sum() * y.sum()

    def f_scalar(lib, x, y):                    # (R^3, R^2x2) -> scalar
        return ((x @ lib.tensor(W)).sin() * y).sum() + (x ** 3).sum() * (y[0, 1] ** 2)

    x0, y0 = rng.standard_normal(3), rng.standard_normal((2, 2))
    vs = {"x": rng.standard_normal(3), "y": rng.standard_normal((2, 2)),
          "o2": rng.standard_normal(2), "o22": rng.standard_normal((2, 2)), "o": rng.standard_normal(())}
    return f_single, f_tuple, f_scalar, x0, y0, vs


def _cmp(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for p, q in zip(a, b):
            _cmp(p, q)
        return
    assert isinstance(a, tg.Tensor)
    assert tuple(a.shape) == tuple(b.shape)
    assert a.requires_grad == b.requires_grad
    np.testing.assert_allclose(arr(a), b.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("create_graph", [False, True])
def test_against_torch(create_graph):
    torch = pytest.importorskip("torch")
    TF = torch.autograd.functional
    f_single, f_tuple, f_scalar, x0, y0, vs = _funcs()

    def both(name, f, ins, v=None, **kw):
        tg_in = tuple(tg.tensor(a) for a in ins)
        th_in = tuple(torch.tensor(a, dtype=torch.float64) for a in ins)
        tg_args = tg_in if len(ins) > 1 else tg_in[0]
        th_args = th_in if len(ins) > 1 else th_in[0]
        extra_tg, extra_th = {}, {}
        if v is not None:
            extra_tg["v"] = tuple(tg.tensor(a) for a in v) if isinstance(v, tuple) else tg.tensor(v)
            extra_th["v"] = (tuple(torch.tensor(a, dtype=torch.float64) for a in v) if isinstance(v, tuple)
                             else torch.tensor(v, dtype=torch.float64))
        got = getattr(F, name)(lambda *a: f(tg, *a), tg_args, create_graph=create_graph, **extra_tg, **kw)
        want = getattr(TF, name)(lambda *a: f(torch, *a), th_args, create_graph=create_graph, **extra_th, **kw)
        _cmp(got, want)
        return got

    both("vjp", f_single, (x0,), vs["o2"])
    both("jvp", f_single, (x0,), vs["x"])
    J = both("jacobian", f_single, (x0,))
    assert J.shape == (2, 3)
    both("vjp", f_tuple, (x0, y0), (vs["o22"], vs["o"]))
    both("jvp", f_tuple, (x0, y0), (vs["x"], vs["y"]))
    J = both("jacobian", f_tuple, (x0, y0))
    assert [[b.shape for b in row] for row in J] == [[(2, 2, 3), (2, 2, 2, 2)], [(3,), (2, 2)]]
    both("vjp", f_scalar, (x0, y0))
    both("jacobian", f_scalar, (x0, y0))
    H = both("hessian", f_scalar, (x0, y0))
    assert [[b.shape for b in row] for row in H] == [[(3, 3), (3, 2, 2)], [(2, 2, 3), (2, 2, 2, 2)]]
    both("hvp", f_scalar, (x0, y0), (vs["x"], vs["y"]))
    both("vhp", f_scalar, (x0, y0), (vs["x"], vs["y"]))
    both("hessian", lambda lib, x: f_scalar(lib, x, lib.tensor(y0)), (x0,))
    both("hvp", lambda lib, x: f_scalar(lib, x, lib.tensor(y0)), (x0,), vs["x"])
    both("vhp", lambda lib, x: f_scalar(lib, x, lib.tensor(y0)), (x0,), vs["x"])
    both("hessian", lambda lib, x: rosenbrock(x), (np.array([-1.2, 1.0, 0.5, 2.0, -0.3]),))


def test_error_messages_match_torch():
    torch = pytest.importorskip("torch")
    TF = torch.autograd.functional

    def msg(fn, *a, **kw):
        with pytest.raises(Exception) as info:
            fn(*a, **kw)
        return type(info.value), str(info.value)

    cases = [
        ("vjp", lambda lib: (lambda t: t * 2), lambda lib: (lib.ones(2),), {}),
        ("jvp", lambda lib: (lambda t: t.sum()), lambda lib: (lib.ones(2),), {}),
        ("hvp", lambda lib: (lambda t: t.sum()), lambda lib: (lib.ones(2),), {}),
        ("vjp", lambda lib: (lambda a, b: a * 2), lambda lib: ((lib.ones(2), lib.ones(2)), lib.ones(2)),
         {"strict": True}),
        ("jvp", lambda lib: (lambda a, b: a * 2), lambda lib: ((lib.ones(2), lib.ones(2)),
                                                               (lib.ones(2), lib.ones(2))), {"strict": True}),
        ("jacobian", lambda lib: (lambda a, b: a * 2), lambda lib: ((lib.ones(2), lib.ones(2)),),
         {"strict": True}),
        ("jacobian", lambda lib: (lambda a: lib.ones(2)), lambda lib: (lib.ones(2),), {"strict": True}),
        ("hessian", lambda lib: (lambda a: (2 * a).sum()), lambda lib: (lib.ones(2),), {"strict": True}),
        ("vhp", lambda lib: (lambda a, b: (a * a).sum()), lambda lib: ((lib.ones(2), lib.ones(2)),
                                                                       (lib.ones(2), lib.ones(2))),
         {"strict": True}),
        ("vjp", lambda lib: (lambda t: t * 2), lambda lib: (lib.ones(2), lib.ones(3)), {}),
        ("jvp", lambda lib: (lambda a, b: a * b), lambda lib: ((lib.ones(2), lib.ones(2)), (lib.ones(2),)), {}),
        ("hessian", lambda lib: (lambda a: (a.sum(),)), lambda lib: (lib.ones(2),), {}),
        ("jacobian", lambda lib: (lambda a: a), lambda lib: ((lib.ones(2), 3),), {}),
        ("jacobian", lambda lib: (lambda a: a), lambda lib: (lib.ones(2),), {"strict": True, "vectorize": True}),
    ]
    for name, mk_f, mk_args, kw in cases:
        got = msg(getattr(F, name), mk_f(tg), *mk_args(tg), **kw)
        want = msg(getattr(TF, name), mk_f(torch), *mk_args(torch), **kw)
        assert got == want, (name, got, want)
