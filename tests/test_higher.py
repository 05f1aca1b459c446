"""Higher-order gradients: create_graph=True in backward/grad, gradgradcheck.

Exact values, PyTorch's create_graph semantics (retain_graph default, warnings,
errors), agreement of the differentiable reverse (create_graph=True) with the
compiled sweep for every operation of tests/test_ops.py, gradgradcheck over the
same catalog, float32, graphs spanning several tapes, and full Hessians against
torch.autograd.functional.hessian when torch is installed.
"""
import os
import sys

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.ops.elementwise as elementwise
from tapegrad.autograd import grad, gradgradcheck

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_ops import (BINARY, MATMUL, PAIRS, REDUCTIONS, SHAPE_OPS, SHAPES, UNARY, inplace_fn,  # noqa: E402
                      leaf, setitem_fn)

SECOND_TIME = "Trying to backward through the graph a second time"
NO_GRAD_FN = "element 0 of tensors does not require grad and does not have a grad_fn"
CYCLE_WARNING = ("Using backward\\(\\) with create_graph=True will create a reference cycle between the "
                 "parameter and its gradient which can cause a memory leak")

rng = np.random.default_rng(1234)


def t(v, rg=False, dtype=None):
    return tg.tensor(np.asarray(v, dtype=np.float64), dtype=dtype, requires_grad=rg)


def val(x):
    return np.asarray(x.detach().numpy())


# ---------------------------------------------------------------------------------------------
# 1. exact values
# ---------------------------------------------------------------------------------------------
def test_repeated_derivatives_of_cube():
    x = t(2.0, rg=True)
    g1, = grad(x ** 3, x, create_graph=True)
    assert g1.item() == 12.0
    assert g1.requires_grad and g1.grad_fn is not None and g1.grad_fn.name() == "MulBackward0"
    g2, = grad(g1, x, create_graph=True)
    assert g2.item() == 12.0 and g2.requires_grad and g2.grad_fn.name() == "MulBackward0"
    g3, = grad(g2, x, create_graph=True)
    # torch: tensor(6., grad_fn=<MulBackward0>): x**2's reverse is g*2*x.pow(1), and x.pow(1)
    # keeps x in the graph, so the third derivative still requires grad
    assert g3.item() == 6.0 and g3.requires_grad and g3.grad_fn.name() == "MulBackward0"
    g4, = grad(g3, x, create_graph=True)          # still depends on x: no "unused" error
    assert g4.item() == 0.0
    assert not g4.requires_grad
    for g in (g1, g2, g3, g4):
        assert isinstance(g, tg.Tensor) and g.shape == x.shape and g.dtype == np.float64


def test_hessian_vector_product_quadratic_form():
    A = t([[2.0, 1.0], [1.0, 3.0]])
    x = t([1.0, 2.0], rg=True)
    f = 0.5 * (x @ (A @ x))
    g, = grad(f, x, create_graph=True)
    np.testing.assert_allclose(val(g), [4.0, 7.0], rtol=0, atol=1e-14)
    assert g.requires_grad
    v = t([1.0, -1.0])
    hv, = grad(g, x, grad_outputs=v, retain_graph=True)
    np.testing.assert_allclose(val(hv), [1.0, -2.0], rtol=0, atol=1e-14)
    hv2, = grad((g * v).sum(), x)
    np.testing.assert_allclose(val(hv2), [1.0, -2.0], rtol=0, atol=1e-14)


def test_hessian_of_nonsymmetric_quadratic_form():
    B = t([[1.0, 2.0], [0.0, 1.0]])
    x = t([1.0, 2.0], rg=True)
    g, = grad(x @ (B @ x), x, create_graph=True)
    H = np.stack([val(grad(g, x, grad_outputs=t(e), retain_graph=True)[0]) for e in np.eye(2)])
    np.testing.assert_allclose(H, [[2.0, 2.0], [2.0, 2.0]], rtol=0, atol=1e-14)   # B + B^T


def test_gradient_penalty():
    w = t([1.0, 2.0], rg=True)
    x = t([3.0, 4.0], rg=True)
    f = (w * x ** 2).sum()
    gx, = grad(f, x, create_graph=True)
    np.testing.assert_allclose(val(gx), [6.0, 16.0], rtol=0, atol=1e-14)
    pen = (gx ** 2).sum()
    assert pen.item() == 292.0
    pen.backward()
    # pen = sum(4 w^2 x^2): d/dw = 8 w x^2, d/dx = 8 w^2 x
    np.testing.assert_allclose(w.grad.numpy(), [72.0, 256.0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), [24.0, 128.0], rtol=0, atol=1e-12)


def rosenbrock(x):
    return (100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2).sum()


def rosenbrock_hessian(x):
    n = len(x)
    H = np.zeros((n, n))
    for i in range(n - 1):
        H[i, i] += 1200.0 * x[i] ** 2 - 400.0 * x[i + 1] + 2.0
        H[i + 1, i + 1] += 200.0
        H[i, i + 1] = H[i + 1, i] = -400.0 * x[i]
    return H


def test_rosenbrock_hessian_rows():
    p = rng.uniform(-1.5, 1.5, size=6)
    x = t(p, rg=True)
    g, = grad(rosenbrock(x), x, create_graph=True)
    rows = []
    for i in range(6):
        r, = grad(g[i], x, retain_graph=True)
        rows.append(val(r))
    np.testing.assert_allclose(np.stack(rows), rosenbrock_hessian(p), rtol=1e-12, atol=1e-10)
    # the same through backward(create_graph=True) on the gradient
    x2 = t(p, rg=True)
    g2, = grad(rosenbrock(x2), x2, create_graph=True)
    g2[2].backward()
    np.testing.assert_allclose(x2.grad.numpy(), rosenbrock_hessian(p)[2], rtol=1e-12, atol=1e-10)


def test_second_derivative_of_sin_and_sigmoid():
    x = t(1.0, rg=True)
    g, = grad(tg.sin(x), x, create_graph=True)
    assert g.item() == pytest.approx(np.cos(1.0), rel=1e-15)
    h, = grad(g, x)
    assert h.item() == pytest.approx(-np.sin(1.0), rel=1e-14)
    z = t(0.0, rg=True)
    g, = grad(tg.sigmoid(z), z, create_graph=True)
    assert g.item() == pytest.approx(0.25, rel=1e-15)
    h, = grad(g, z)
    assert abs(h.item()) < 1e-15
    # and away from 0: s'' = s(1-s)(1-2s)
    z = t(0.7, rg=True)
    g, = grad(tg.sigmoid(z), z, create_graph=True)
    h, = grad(g, z)
    s = 1 / (1 + np.exp(-0.7))
    assert h.item() == pytest.approx(s * (1 - s) * (1 - 2 * s), rel=1e-12)


# ---------------------------------------------------------------------------------------------
# 2. PyTorch's create_graph semantics
# ---------------------------------------------------------------------------------------------
def test_retain_graph_defaults_to_create_graph_backward():
    x = t(2.0, rg=True)
    y = x ** 3
    with pytest.warns(UserWarning, match=CYCLE_WARNING):
        y.backward(create_graph=True)
    assert x.grad.item() == 12.0
    y.backward()                         # the graph was retained
    assert x.grad.item() == 24.0


def test_retain_graph_defaults_to_create_graph_grad():
    x = t(2.0, rg=True)
    y = x ** 3
    g, = grad(y, x, create_graph=True)
    g_again, = grad(y, x)                # retained by default
    assert g_again.item() == 12.0 and not g_again.requires_grad
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        grad(y, x)                       # now it was freed
    h, = grad(g, x)                      # the gradient's own graph is intact
    assert h.item() == 12.0


def test_create_graph_without_retain_graph_frees_the_graph():
    x = t(2.0, rg=True)
    y = x ** 3
    with pytest.warns(UserWarning, match=CYCLE_WARNING):
        y.backward(create_graph=True, retain_graph=False)
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        y.backward()
    gx = x.grad                          # the gradient graph built can still be differentiated
    x.grad = None
    gx.backward()
    assert x.grad.item() == 12.0

    x = t(2.0, rg=True)
    y = x ** 3
    g, = grad(y, x, create_graph=True, retain_graph=False)
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        grad(y, x)
    assert grad(g, x)[0].item() == 12.0


def test_backward_create_graph_warning_text_and_grad():
    x = t(2.0, rg=True)
    with pytest.warns(UserWarning) as rec:
        (x ** 3).backward(create_graph=True)
    msgs = [str(w.message) for w in rec if issubclass(w.category, UserWarning)]
    assert ("Using backward() with create_graph=True will create a reference cycle between the parameter and "
            "its gradient which can cause a memory leak. We recommend using autograd.grad when creating the "
            "graph to avoid this. If you have to use this function, make sure to reset the .grad fields of "
            "your parameters to None after use to break the cycle and avoid the leak.") in msgs
    assert x.grad.item() == 12.0
    assert x.grad.requires_grad
    assert x.grad.grad_fn is not None and x.grad.grad_fn.name() == "CopyBackwards"
    assert repr(x.grad) == "tensor(12., grad_fn=<CopyBackwards>)"
    gx = x.grad
    x.grad = None
    gx.backward()
    assert x.grad.item() == 12.0 and not x.grad.requires_grad


def test_autograd_backward_create_graph():
    x = t([1.0, 2.0], rg=True)
    with pytest.warns(UserWarning, match=CYCLE_WARNING):
        tg.autograd.backward([(x ** 3).sum()], create_graph=True)
    np.testing.assert_allclose(x.grad.numpy() if not x.grad.requires_grad else val(x.grad), [3.0, 12.0])
    assert x.grad.requires_grad
    h, = grad(x.grad.sum(), x)
    np.testing.assert_allclose(val(h), [6.0, 12.0])


def test_grad_create_graph_does_not_warn_or_touch_grad(recwarn):
    x = t(2.0, rg=True)
    grad(x ** 3, x, create_graph=True)
    assert x.grad is None
    assert not [w for w in recwarn if "reference cycle" in str(w.message)]


@pytest.mark.parametrize("fn,expected", [(lambda x: 3 * x, 3.0), (lambda x: x + 1, 1.0)], ids=["3x", "x+1"])
def test_constant_first_derivative_does_not_require_grad(fn, expected):
    x = t(2.0, rg=True)
    g, = grad(fn(x), x, create_graph=True)
    assert g.item() == expected
    assert not g.requires_grad and g.grad_fn is None
    with pytest.raises(RuntimeError, match=NO_GRAD_FN):
        grad(g, x)
    with pytest.raises(RuntimeError, match=NO_GRAD_FN):
        g.backward()
    x2 = t(2.0, rg=True)
    with pytest.warns(UserWarning, match=CYCLE_WARNING):
        fn(x2).backward(create_graph=True)
    assert x2.grad.item() == expected and not x2.grad.requires_grad
    with pytest.raises(RuntimeError, match=NO_GRAD_FN):
        x2.grad.backward()


def test_gradient_without_create_graph_is_not_differentiable():
    x = t(2.0, rg=True)
    y = x ** 3
    g, = grad(y, x, retain_graph=True)
    assert g.item() == 12.0 and not g.requires_grad and g.grad_fn is None
    with pytest.raises(RuntimeError, match=NO_GRAD_FN):
        grad(g, x)
    with pytest.raises(RuntimeError, match=NO_GRAD_FN):
        g.backward()
    y.backward()
    assert x.grad.item() == 12.0 and not x.grad.requires_grad
    with pytest.raises(RuntimeError, match=NO_GRAD_FN):
        x.grad.backward()


def test_grad_outputs_requiring_grad_are_differentiated():
    xv, vv = rng.standard_normal(4), rng.standard_normal(4)
    x, v = t(xv, rg=True), t(vv, rg=True)
    y = x ** 2
    g, = grad(y, x, grad_outputs=v, create_graph=True)
    np.testing.assert_allclose(val(g), 2 * xv * vv, rtol=1e-14)
    dv, dx = grad(g.sum(), [v, x])
    np.testing.assert_allclose(val(dv), 2 * xv, rtol=1e-14)
    np.testing.assert_allclose(val(dx), 2 * vv, rtol=1e-14)
    # a linear output: the gradient depends only on v
    x = t(xv, rg=True)
    v = t(vv, rg=True)
    g, = grad(3 * x, x, grad_outputs=v, create_graph=True)
    assert g.requires_grad
    np.testing.assert_allclose(val(g), 3 * vv, rtol=1e-14)
    dv, = grad((g * g).sum(), v)
    np.testing.assert_allclose(val(dv), 18 * vv, rtol=1e-14)


def test_grad_outputs_requiring_grad_through_backward():
    x, v = t([1.0, 2.0], rg=True), t([3.0, 5.0], rg=True)
    with pytest.warns(UserWarning, match=CYCLE_WARNING):
        (x ** 2).backward(v, create_graph=True)
    np.testing.assert_allclose(val(x.grad), [6.0, 20.0])
    gx = x.grad
    x.grad = None
    gx.sum().backward()                  # d/dx sum(2 x v) = 2 v ; d/dv = 2 x
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 10.0])
    np.testing.assert_allclose(v.grad.numpy(), [2.0, 4.0])


def test_second_order_backward_accumulates():
    x = t([1.0, 2.0], rg=True)
    gx, = grad((x ** 3).sum(), x, create_graph=True)        # 3x^2
    h = (gx ** 2).sum()                                      # 9 x^4 -> 36 x^3
    h.backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), [36.0, 288.0], rtol=1e-14)
    first = x.grad
    h.backward()
    np.testing.assert_allclose(x.grad.numpy(), [72.0, 576.0], rtol=1e-14)
    assert x.grad is first                                   # accumulated in place
    # a fresh gradient graph, backwarded again, keeps accumulating
    gx, = grad((x ** 3).sum(), x, create_graph=True)
    (gx ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [108.0, 864.0], rtol=1e-14)


def test_double_backward_via_backward_accumulates_with_graph():
    x = t(2.0, rg=True)
    with pytest.warns(UserWarning, match=CYCLE_WARNING):
        (x ** 3).backward(create_graph=True)
    with pytest.warns(UserWarning, match=CYCLE_WARNING):
        (x ** 2).backward(create_graph=True)
    assert x.grad.item() == 16.0 and x.grad.requires_grad       # 12 + 4
    h, = grad(x.grad, x)
    assert h.item() == 14.0                                     # 6x + 2


def test_materialized_unused_gradient_requires_grad_with_create_graph():
    x, z = t([1.0, 2.0], rg=True), t([1.0], rg=True)
    gx, gz = grad((x ** 2).sum(), [x, z], create_graph=True, materialize_grads=True)
    np.testing.assert_allclose(val(gx), [2.0, 4.0])
    np.testing.assert_array_equal(val(gz), [0.0])
    assert gz.requires_grad and gz.grad_fn is None


def test_inplace_on_value_not_needed_by_the_gradient_graph():
    # g = 2h: its graph multiplies the constant seed by h, which keeps only the seed
    # (PyTorch too), so changing h in place afterwards is fine
    x = t([1.0, 2.0], rg=True)
    h = x * 1.0
    g, = grad((h * h).sum(), x, create_graph=True)
    h.mul_(3.0)
    d, = grad(g.sum(), x)
    np.testing.assert_allclose(val(d), [2.0, 2.0])


def test_inplace_on_value_needed_by_the_gradient_graph_raises():
    x = t([1.0, 2.0], rg=True)
    h = x * 1.0
    g, = grad((h * h * h).sum(), x, create_graph=True)    # g = 3h^2: its graph reads h
    h.mul_(3.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        grad(g.sum(), x)


def test_retained_graph_gradient_is_not_mutated_by_later_backward():
    x = t([1.0, 2.0], rg=True)
    y = x * x
    y.retain_grad()
    with pytest.warns(UserWarning, match=CYCLE_WARNING):
        (y * y).sum().backward(create_graph=True)
    yg = y.grad
    assert yg.requires_grad
    np.testing.assert_allclose(val(yg), [2.0, 8.0])
    grad(yg.sum(), x)                                      # reaches y: y.grad accumulates [2, 2]
    np.testing.assert_allclose(val(y.grad), [4.0, 10.0])
    np.testing.assert_allclose(val(yg), [2.0, 8.0])        # the tensor the user holds is unchanged


# ---------------------------------------------------------------------------------------------
# 3. every operation: create_graph=True agrees with the compiled sweep
# ---------------------------------------------------------------------------------------------
def _catalog():
    cases = []
    for name in sorted(UNARY):
        fn, kw = UNARY[name]
        for shape in SHAPES:
            cases.append(pytest.param(fn, lambda shape=shape, kw=kw: (leaf(*shape, **kw),),
                                      id="unary-%s-%s" % (name, shape)))
    for name in sorted(BINARY):
        fn, kw = BINARY[name]
        for sa, sb in PAIRS:
            cases.append(pytest.param(fn, lambda sa=sa, sb=sb, kw=kw: (leaf(*sa, **kw), leaf(*sb, **kw)),
                                      id="binary-%s-%s-%s" % (name, sa, sb)))
    for name in sorted(REDUCTIONS):
        cases.append(pytest.param(REDUCTIONS[name], lambda: (leaf(2, 3, 4),), id="reduce-" + name))
    for name in sorted(SHAPE_OPS):
        cases.append(pytest.param(SHAPE_OPS[name], lambda: (leaf(2, 3, 4),), id="shape-" + name))
    for sa, sb in MATMUL:
        cases.append(pytest.param(lambda a, b: a @ b, lambda sa=sa, sb=sb: (leaf(*sa), leaf(*sb)),
                                  id="matmul-%s-%s" % (sa, sb)))
    cases.append(pytest.param(setitem_fn, lambda: (leaf(3, 4), leaf(4)), id="setitem"))
    cases.append(pytest.param(inplace_fn, lambda: (leaf(3, 4),), id="inplace"))
    return cases


CATALOG = _catalog()


@pytest.mark.parametrize("storage", ["arena", "by-address"])
@pytest.mark.parametrize("fn,make", CATALOG)
def test_create_graph_matches_compiled_sweep(fn, make, storage, monkeypatch):
    if storage == "by-address":         # every slot of the compiled sweep passed by address
        from tapegrad.autograd import engine
        monkeypatch.setattr(engine, "BIG", 1)
    inputs = make()
    y = fn(*inputs)
    w = tg.tensor(rng.standard_normal(y.shape))
    loss = (y * w).sum()
    plain = grad(loss, inputs, retain_graph=True)
    graph = grad(loss, inputs, create_graph=True)
    assert len(plain) == len(graph) == len(inputs)
    for x, p, g in zip(inputs, plain, graph):
        assert isinstance(g, tg.Tensor)
        assert tuple(g.shape) == tuple(x.shape)
        assert g.dtype == x.dtype
        np.testing.assert_allclose(val(g), val(p), rtol=1e-10, atol=1e-12)
    # and through backward(create_graph=True), which accumulates into .grad
    y = fn(*inputs)
    with pytest.warns(UserWarning, match=CYCLE_WARNING):
        (y * w).sum().backward(create_graph=True)
    for x, p in zip(inputs, plain):
        assert tuple(x.grad.shape) == tuple(x.shape) and x.grad.dtype == x.dtype
        np.testing.assert_allclose(val(x.grad), val(p), rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# 4. gradgradcheck
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn,make", CATALOG)
def test_gradgradcheck(fn, make):
    assert gradgradcheck(fn, make())


def test_gradgradcheck_detects_a_cut_graph(monkeypatch):
    x = leaf(5)
    assert gradgradcheck(tg.sin, x)
    ns = elementwise._graph_ns()
    assert "cos" in ns
    monkeypatch.setitem(ns, "cos", lambda v, *a: tg.Tensor._wrap(np.cos(v._data)))
    # first derivatives are still right...
    g, = grad(tg.sin(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(val(g), np.cos(val(x)), rtol=1e-14)
    # ...but the second ones are not
    assert gradgradcheck(tg.sin, x, raise_exception=False) is False
    with pytest.raises(tg.autograd.GradcheckError):
        gradgradcheck(tg.sin, x)


def test_gradgradcheck_with_given_grad_outputs():
    x = leaf(3, 4)
    v = tg.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    assert gradgradcheck(lambda x: x.tanh() * x, x, grad_outputs=v)
    assert gradgradcheck(lambda a, b: (a * b).sin(), (leaf(3), leaf(3)))


# ---------------------------------------------------------------------------------------------
# 5. float32
# ---------------------------------------------------------------------------------------------
def test_float32_create_graph_gradient_is_float32():
    x = tg.tensor([1.0, 2.0], dtype=tg.float32, requires_grad=True)
    g, = grad((x ** 3).sum(), x, create_graph=True)
    assert g.dtype == np.float32 and g.requires_grad
    np.testing.assert_allclose(val(g), [3.0, 12.0], rtol=1e-6)
    h, = grad(g.sum(), x)
    assert h.dtype == np.float32
    np.testing.assert_allclose(val(h), [6.0, 12.0], rtol=1e-6)
    x2 = tg.tensor([1.0, 2.0], dtype=tg.float32, requires_grad=True)
    with pytest.warns(UserWarning, match=CYCLE_WARNING):
        (x2 ** 3).sum().backward(create_graph=True)
    assert x2.grad.dtype == np.float32


def test_float32_leaf_with_float64_operand():
    x = tg.tensor([1.0, 2.0], dtype=tg.float32, requires_grad=True)
    c = tg.tensor([3.0, 5.0])                      # float64
    y = (x * x * c).sum()
    assert y.dtype == np.float64
    g, = grad(y, x, create_graph=True)
    assert g.dtype == np.float32
    np.testing.assert_allclose(val(g), [6.0, 20.0], rtol=1e-6)
    h, = grad(g.sum(), x)
    assert h.dtype == np.float32
    np.testing.assert_allclose(val(h), [6.0, 10.0], rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# 6. graphs over several tapes
# ---------------------------------------------------------------------------------------------
def test_second_derivative_across_tapes():
    xv = rng.uniform(0.5, 1.5, size=3)
    x = t(xv, rg=True)
    a = tg.sin(x) * x                            # recorded on the first tape
    other = t([1.0, 2.0], rg=True)
    (other ** 2).sum().backward()                # a backward in between: a new tape starts
    np.testing.assert_allclose(other.grad.numpy(), [2.0, 4.0])
    f = (a * x ** 2).sum()                       # f = sum(x^3 sin x), on the new tape
    g, = grad(f, x, create_graph=True)
    np.testing.assert_allclose(val(g), 3 * xv ** 2 * np.sin(xv) + xv ** 3 * np.cos(xv), rtol=1e-12)
    b = t([0.5], rg=True)
    (b * 3).sum().backward()                     # another tape in between
    h, = grad(g.sum(), x)
    d2 = 6 * xv * np.sin(xv) + 6 * xv ** 2 * np.cos(xv) - xv ** 3 * np.sin(xv)
    np.testing.assert_allclose(val(h), d2, rtol=1e-12)


def test_gradient_graph_reused_after_other_backward():
    x = t([0.3, -0.8], rg=True)
    g, = grad(tg.tanh(x).sum(), x, create_graph=True)       # 1 - tanh^2
    z = t(1.0, rg=True)
    (z * z).backward()
    loss = (g * tg.exp(x)).sum()                              # more ops on a new tape
    h, = grad(loss, x)
    xv = np.array([0.3, -0.8])
    th = np.tanh(xv)
    expected = -2 * th * (1 - th ** 2) * np.exp(xv) + (1 - th ** 2) * np.exp(xv)
    np.testing.assert_allclose(val(h), expected, rtol=1e-12)


def test_every_op_on_its_own_tape():
    """tape.rotate() after each operation: the first and second derivatives are unchanged."""
    from tapegrad.core import tape as _tp
    p = rng.uniform(-1.0, 1.0, size=6)

    def run(rotate):
        x = t(p, rg=True)
        y = x
        ops = [lambda v: v * 1.3, tg.sin, lambda v: v[1:] * v[:-1], tg.exp, lambda v: v.sum() ** 2]
        for op in ops:
            y = op(y)
            if rotate:
                _tp.rotate()
        g, = grad(y, x, create_graph=True)
        if rotate:
            _tp.rotate()
        H = []
        for i in range(6):
            r, = grad(g[i], x, retain_graph=True)
            H.append(val(r))
            if rotate:
                _tp.rotate()
        return val(g), np.stack(H)

    g0, H0 = run(False)
    g1, H1 = run(True)
    np.testing.assert_allclose(g1, g0, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(H1, H0, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(H0, H0.T, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# 7. full Hessians against torch.autograd.functional.hessian
# ---------------------------------------------------------------------------------------------
def _comp_tanh_mm(p, lib):
    x, W = p[:6].reshape(2, 3), p[6:].reshape(3, 2)
    return lib.tanh(x @ W).sum() ** 2


def _comp_softmax(p, lib):
    x = p.reshape(3, 4)
    return (x.log_softmax(-1)[[0, 1, 2], [1, 3, 0]].sum()
            + (x.softmax(0)[:, 1:3] ** 2).sum() + x.softmax(-1)[1, 2] * x[0, 0])


def _comp_prod_var_std(p, lib):
    x = p.reshape(3, 4)
    return x.prod(1).sum() + (x.var(0) * x[0]).sum() + x.std(1).sum() + x.std(0, unbiased=False).sum()


def _comp_pow_max_where(p, lib):
    a, b = p[:4], p[4:]
    base = a * a + 1.0
    return ((base ** b).sum() + (lib.maximum(a, b) * a).sum()
            + lib.where(a > b, a * b, b * b * a).sum())


COMPOSITIONS = {"tanh_mm": (_comp_tanh_mm, 12), "softmax": (_comp_softmax, 12),
                "prod_var_std": (_comp_prod_var_std, 12), "pow_max_where": (_comp_pow_max_where, 8)}


def _tg_hessian(fn, p):
    x = t(p, rg=True)
    g, = grad(fn(x, tg), x, create_graph=True)
    rows = []
    for i in range(len(p)):
        r, = grad(g[i], x, retain_graph=True, allow_unused=True)
        rows.append(np.zeros(len(p)) if r is None else val(r))
    return val(g), np.stack(rows)


@pytest.mark.parametrize("name", sorted(COMPOSITIONS))
def test_hessian_matches_torch(name):
    torch = pytest.importorskip("torch")
    fn, n = COMPOSITIONS[name]
    p = rng.uniform(-1.0, 1.0, size=n)
    if name == "pow_max_where":
        p[4:] = p[:4] + np.array([0.3, -0.4, 0.5, -0.6])   # no ties in maximum/where
    g, H = _tg_hessian(fn, p)
    pt = torch.tensor(p, dtype=torch.float64, requires_grad=True)
    gt, = torch.autograd.grad(fn(pt, torch), pt)
    Ht = torch.autograd.functional.hessian(lambda q: fn(q, torch), torch.tensor(p, dtype=torch.float64))
    np.testing.assert_allclose(g, gt.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(H, Ht.numpy(), rtol=1e-9, atol=1e-11)


def test_one_element_adjoint_of_a_full_sum_is_expanded_where_needed():
    """The reverse of a full sum or mean hands on one element standing for all of
    them; every consumer must see the same gradient as with an explicit one."""
    rng = np.random.default_rng(3)
    xv, cv = rng.uniform(0.5, 1.5, (3, 4)), rng.uniform(0.5, 1.5, (1,))

    def f(x, c):
        s = (x + c).sum() + (x * c).mean()        # c broadcast: its gradient sums the n copies
        y = x * s                                 # the sum's adjoint meets a full-size operand
        return (y[1:, ::2] ** 2).sum() + tg.cat([x, x]).mean() + (x @ x.T).sum() * c.sum()

    for create_graph in (False, True):
        x, c = tg.tensor(xv, requires_grad=True), tg.tensor(cv, requires_grad=True)
        gx, gc = tg.autograd.grad(f(x, c), (x, c), create_graph=create_graph)
        if create_graph:
            ref = (gx.detach().numpy(), gc.detach().numpy())
        else:
            base = (gx.numpy(), gc.numpy())
    np.testing.assert_allclose(ref[0], base[0], rtol=1e-12)
    np.testing.assert_allclose(ref[1], base[1], rtol=1e-12)
    x, c = tg.tensor(xv, requires_grad=True), tg.tensor(cv, requires_grad=True)
    assert tg.autograd.gradgradcheck(f, (x, c))


def test_mark_stops_at_the_lowest_target_with_the_same_result():
    """A loop of create_graph grads resumes one tape, which grows with history; the mark
    of each grad stops at its lowest target (or EXT entry) and must find what the mark of
    the whole tape finds: the same entries to process, reached and kept."""
    from tapegrad.autograd import walk
    from tapegrad.kernels import sweep as K
    x0 = np.linspace(-1, 1, 6)
    older = tg.tensor(x0, requires_grad=True) * 2.0          # (a tensor of an older tape: EXT entries)
    seen = []
    orig = K.mark.py_func

    def both(ints, aux, saves, freed, roots, targets, use_targets, ext_leads, lo):
        got = orig(ints, aux, saves, freed, roots, targets, use_targets, ext_leads, lo)
        full = orig(ints, aux, saves, freed, roots, targets, use_targets, ext_leads, 0)
        seen.append(lo)
        for a, b in zip(got, full):
            np.testing.assert_array_equal(a, b)
        return got
    old = K.mark
    K.mark = type("M", (), {"py_func": staticmethod(both), "__call__": staticmethod(both)})()
    try:
        for i in range(6):
            x = tg.tensor(x0 + i, requires_grad=True)
            y = (x.sin() * older).sum() + (x ** 3).sum()
            u = x.cos()                                       # (recorded before h, leads to x)
            h = x * 1.5                                       # an intermediate target
            z = (h.exp() * u).sum()
            g, = grad(y, x, create_graph=True)
            gh, gx = grad(z, [h, x], create_graph=True)
            go, = grad(y, [older], create_graph=True)          # through an EXT entry
            (g * gx).sum().backward(retain_graph=True)       # (older's graph serves every round)
            np.testing.assert_allclose(g.detach().numpy(), np.cos(x0 + i) * older.detach().numpy()
                                       + 3 * (x0 + i) ** 2, rtol=1e-12)
            np.testing.assert_allclose(gh.detach().numpy(), np.exp(1.5 * (x0 + i)) * np.cos(x0 + i), rtol=1e-12)
            xi = x0 + i     # (x's gradient counts the path through h too, as PyTorch's)
            np.testing.assert_allclose(gx.detach().numpy(), np.exp(1.5 * xi) * (1.5 * np.cos(xi) - np.sin(xi)),
                                       rtol=1e-12)
    finally:
        K.mark = old
    assert max(seen) > 0            # (the bound was used, not only lo = 0)


def test_create_graph_without_retain_graph():
    """grad(create_graph=True, retain_graph=False): the original graph is freed, but the
    gradient's graph keeps the values it reads, as PyTorch's (it read freed memory: garbage).
    A backward through the freed graph raises, as PyTorch's, also where the gradient's graph
    leads through it (exp's output)."""
    x0, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 2.0, -1.0])
    for _ in range(2):
        x = tg.tensor(x0, requires_grad=True)
        y = (x ** 3).sum()
        g, = tg.autograd.grad(y, x, create_graph=True, retain_graph=False)
        (g * tg.tensor(v)).sum().backward()
        np.testing.assert_allclose(g.detach().numpy(), 3 * x0 ** 2, rtol=1e-15)
        np.testing.assert_allclose(x.grad.numpy(), 6 * x0 * v, rtol=1e-15)
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.backward()
    x = tg.tensor(x0, requires_grad=True)
    y = (x.exp() * x).sum()
    g, = tg.autograd.grad(y, x, create_graph=True, retain_graph=False)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        (g * g).sum().backward()
    torch = pytest.importorskip("torch")
    xt = torch.tensor(x0, requires_grad=True)
    gt, = torch.autograd.grad((xt ** 3).sum(), xt, create_graph=True, retain_graph=False)
    (gt * torch.tensor(v)).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), 6 * x0 * v, rtol=1e-15)
    xt = torch.tensor(x0, requires_grad=True)
    gt, = torch.autograd.grad((xt.exp() * xt).sum(), xt, create_graph=True, retain_graph=False)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        (gt * gt).sum().backward()


def test_a_value_freed_under_a_live_entry_raises_not_garbage():
    """The engine's guard: a value dropped while an entry that reads it is still to be swept
    (the bug above) raises PyTorch's error instead of being read as NaN and shifting the
    others (small values) or crashing (large ones)."""
    from tapegrad import _jit
    from tapegrad.autograd import engine
    _jit.load()
    for n in (3, 5000):         # (a small value goes into the arena, a large one by address)
        x = tg.tensor(np.linspace(0.1, 0.9, n), requires_grad=True)
        y = (x.exp() * x).sum()         # (mul reads exp's output)
        T = y._tape
        dropped = [i for i, v in enumerate(T.vals) if v is not None and np.size(v) == n]
        assert dropped
        for s in dropped:
            T.vals[s] = None
        old, engine.INTERPRET[0] = engine.INTERPRET[0], "never"
        try:
            with pytest.raises(RuntimeError, match="backward through the graph a second time"):
                y.backward()
        finally:
            engine.INTERPRET[0] = old
