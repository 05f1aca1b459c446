"""tg.atan2 / tg.arctan2 / Tensor.atan2: one row of the elementwise table
(ops/elementwise.py), checked through every path that row feeds: eager values,
the compiled and the interpreted reverse, create_graph, tg.compile / tg.record
replays, and the compiled replay of single numbers."""
import math

import numpy as np
import pytest

import tapegrad as tg

A = [0.0, 1.0, -1.0, 2.0, -0.5]
B = [0.0, 2.0, -3.0, -0.5, 0.0]
# torch.atan2 of A, B and its gradient (summed output), float64
VALUES = [0.0, 0.4636476090008061, -2.819842099193151, 1.8157749899217608, -1.5707963267948966]
GRAD_A = [0.0, 0.4, -0.30000000000000004, -0.11764705882352941, 0.0]
GRAD_B = [-0.0, -0.2, 0.1, -0.47058823529411764, 2.0]


def _leaves():
    return tg.tensor(A, requires_grad=True), tg.tensor(B, requires_grad=True)


def test_values_and_grad_fn():
    a, b = _leaves()
    y = tg.atan2(a, b)
    assert y.grad_fn.name() == "Atan2Backward0"
    np.testing.assert_allclose(y.detach().numpy(), VALUES, rtol=1e-15, atol=0)
    for other in (tg.arctan2(a, b), a.atan2(b), a.arctan2(b)):
        assert np.array_equal(other.detach().numpy(), y.detach().numpy())


def test_gradient_compiled_and_interpreted(reverse):
    # "never": the compiled reverse sweep (the generated binary kernel); "always": NumPy
    a, b = _leaves()
    tg.atan2(a, b).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), GRAD_A, rtol=1e-15, atol=0)
    np.testing.assert_allclose(b.grad.numpy(), GRAD_B, rtol=1e-15, atol=0)
    # at (0, 0) PyTorch's gradient is 0 for both inputs, not nan
    assert a.grad[0].item() == 0.0 and b.grad[0].item() == 0.0


def test_gradient_where_the_denominator_is_zero_or_infinite(reverse):
    # PyTorch's: 0 where a * a + b * b is 0, also when it underflows; an infinite a gives (0, nan)
    a = tg.tensor([1e-200, 0.0, 1e-200, np.inf], requires_grad=True)
    b = tg.tensor([1e-200, 1e-200, 0.0, 1.0], requires_grad=True)
    tg.atan2(a, b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(b.grad.numpy(), [0.0, 0.0, 0.0, np.nan])


def test_gradient_where_the_denominator_is_zero_matches_torch():
    torch = pytest.importorskip("torch")
    av, bv = [1e-200, 0.0, 1e-200, np.inf, 0.0], [1e-200, 1e-200, 0.0, 1.0, 0.0]
    a, b = tg.tensor(av, requires_grad=True), tg.tensor(bv, requires_grad=True)
    at = torch.tensor(av, dtype=torch.float64, requires_grad=True)
    bt = torch.tensor(bv, dtype=torch.float64, requires_grad=True)
    tg.atan2(a, b).sum().backward()
    torch.atan2(at, bt).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), at.grad.numpy())
    np.testing.assert_array_equal(b.grad.numpy(), bt.grad.numpy())


def test_broadcast_gradient(reverse):
    a = tg.tensor([[1.0], [2.0]], requires_grad=True)
    b = tg.tensor([1.0, -1.0, 3.0], requires_grad=True)
    tg.atan2(a, b).sum().backward()
    av, bv = np.array([[1.0], [2.0]]), np.array([1.0, -1.0, 3.0])
    d = av * av + bv * bv
    np.testing.assert_allclose(a.grad.numpy(), (bv / d).sum(1, keepdims=True), rtol=1e-14)
    np.testing.assert_allclose(b.grad.numpy(), (-av / d).sum(0), rtol=1e-14)


def test_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    av, bv = rng.standard_normal((3, 4)), rng.standard_normal((4,))
    a, b = tg.tensor(av, requires_grad=True), tg.tensor(bv, requires_grad=True)
    at, bt = torch.tensor(av, requires_grad=True), torch.tensor(bv, requires_grad=True)
    w = rng.standard_normal((3, 4))
    y, yt = tg.atan2(a, b), torch.atan2(at, bt)
    (y * tg.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-15)
    np.testing.assert_allclose(a.grad.numpy(), at.grad.numpy(), rtol=1e-13)
    np.testing.assert_allclose(b.grad.numpy(), bt.grad.numpy(), rtol=1e-13)
    # the literal values above are torch's
    at = torch.tensor(A, dtype=torch.float64, requires_grad=True)
    bt = torch.tensor(B, dtype=torch.float64, requires_grad=True)
    yt = torch.atan2(at, bt)
    yt.sum().backward()
    assert yt.tolist() == pytest.approx(VALUES, rel=1e-15)
    assert at.grad.tolist() == pytest.approx(GRAD_A, rel=1e-15)
    assert bt.grad.tolist() == pytest.approx(GRAD_B, rel=1e-15)


def test_dtypes():
    # integers and bools give the default float (float64 in tapegrad), floats promote as PyTorch's
    assert tg.atan2(tg.tensor([1, 2]), tg.tensor([3, 4])).dtype == tg.float64
    assert tg.atan2(tg.tensor([True]), tg.tensor([False])).dtype == tg.float64
    assert tg.atan2(tg.tensor([1], dtype=tg.int8), tg.tensor([3], dtype=tg.int8)).dtype == tg.float64
    assert tg.atan2(tg.tensor([1.0], dtype=tg.float16), tg.tensor([2.0], dtype=tg.float32)).dtype == tg.float32
    assert tg.atan2(tg.tensor([1.0], dtype=tg.float32), tg.tensor([2.0], dtype=tg.float32)).dtype == tg.float32
    np.testing.assert_allclose(tg.atan2(tg.tensor([1, 2]), tg.tensor([3, 4])).numpy(),
                               [0.3217505543966422, 0.4636476090008061], rtol=1e-15)


def test_dtypes_match_torch():
    torch = pytest.importorskip("torch")
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)      # (tapegrad's default)
    try:
        for da, db in (("int64", "int64"), ("int8", "int8"), ("bool", "bool"), ("float16", "float32"),
                       ("float32", "float64")):
            x, y = np.array([1, 0]).astype(da), np.array([3, 1]).astype(db)
            got = tg.atan2(tg.tensor(x), tg.tensor(y))
            want = torch.atan2(torch.tensor(x), torch.tensor(y))
            assert got.dtype.name == str(want.dtype)[6:]
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    finally:
        torch.set_default_dtype(old)


def test_errors_name_the_argument():
    a = tg.tensor([1.0])
    with pytest.raises(TypeError, match=r"^atan2\(\): argument 'other' \(position 2\) must be Tensor, not float$"):
        tg.atan2(a, 2.0)
    with pytest.raises(TypeError, match=r"^atan2\(\): argument 'input' \(position 1\) must be Tensor, not float$"):
        tg.atan2(2.0, a)
    with pytest.raises(TypeError, match=r"^atan2\(\): argument 'other' \(position 1\) must be Tensor, not int$"):
        a.atan2(2)
    with pytest.raises(TypeError, match=r"^arctan2\(\): argument 'other' \(position 2\)"):
        tg.arctan2(a, 2.0)
    with pytest.raises(RuntimeError, match="The size of tensor a"):
        tg.atan2(tg.tensor([1.0, 2.0]), tg.tensor([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("shapes", [((), ()), ((4,), (4,)), ((3, 1), (1, 4)), ((2, 3), ())], ids=str)
def test_gradcheck_and_gradgradcheck(shapes):
    rng = np.random.default_rng(len(shapes[0]) + 7)
    a = tg.tensor(rng.uniform(0.3, 2.0, shapes[0]) * rng.choice([-1, 1], shapes[0]), requires_grad=True)
    b = tg.tensor(rng.uniform(0.3, 2.0, shapes[1]) * rng.choice([-1, 1], shapes[1]), requires_grad=True)
    assert tg.autograd.gradcheck(tg.atan2, (a, b))
    assert tg.autograd.gradgradcheck(tg.atan2, (a, b))


def test_create_graph_second_derivatives():
    # d/da atan2(a, b) = b / (a^2 + b^2); at (1, 2): d2/da2 = -2ab / 25 = -0.16, d2/dadb = (a^2 - b^2) / 25 = -0.12
    a = tg.tensor(1.0, requires_grad=True)
    b = tg.tensor(2.0, requires_grad=True)
    ga, gb = tg.autograd.grad(tg.atan2(a, b), (a, b), create_graph=True)
    assert ga.item() == pytest.approx(0.4, rel=1e-15) and gb.item() == pytest.approx(-0.2, rel=1e-15)
    assert ga.requires_grad
    gaa, gab = tg.autograd.grad(ga, (a, b))
    assert gaa.item() == pytest.approx(-0.16, rel=1e-14)
    assert gab.item() == pytest.approx(-0.12, rel=1e-14)


def _eager(x, y):
    return (tg.atan2(x, y) * x).sum()


def test_compile_replays_with_new_inputs():
    cf = tg.compile(_eager)
    rng = np.random.default_rng(11)
    for _ in range(3):
        xv, yv = rng.standard_normal(6), rng.standard_normal(6)
        x, y = tg.tensor(xv, requires_grad=True), tg.tensor(yv, requires_grad=True)
        out = cf(x, y)
        out.backward()
        want = (np.arctan2(xv, yv) * xv).sum()
        d = xv * xv + yv * yv
        assert out.item() == pytest.approx(want, rel=1e-14)
        np.testing.assert_allclose(x.grad.numpy(), np.arctan2(xv, yv) + xv * yv / d, rtol=1e-13)
        np.testing.assert_allclose(y.grad.numpy(), -xv * xv / d, rtol=1e-13)
    assert cf.stats.recordings == 1 and cf.stats.replays == 2


def test_record_replays_with_new_inputs():
    xv, yv = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.25, -2.0])
    tape = tg.record(_eager, xv, yv)
    xv2, yv2 = np.array([1.0, 2.0, -3.0]), np.array([-1.0, 0.5, 4.0])
    v, (gx, gy) = tape.value_and_grad(xv2, yv2)
    d = xv2 * xv2 + yv2 * yv2
    assert v == pytest.approx((np.arctan2(xv2, yv2) * xv2).sum(), rel=1e-14)
    np.testing.assert_allclose(gx, np.arctan2(xv2, yv2) + xv2 * yv2 / d, rtol=1e-13)
    np.testing.assert_allclose(gy, -xv2 * xv2 / d, rtol=1e-13)


def test_single_number_chain_replays_in_the_compiled_scalar_loop():
    def chain(x, y):
        z = x
        for _ in range(5):
            z = tg.atan2(z, y) + z * 0.5
        return z

    def reference(x, y):        # the same chain on Python floats, and its derivatives by the chain rule
        z, dz_dx, dz_dy = x, 1.0, 0.0
        for _ in range(5):
            d = z * z + y * y
            da, db = y / d, -z / d
            z, dz_dx, dz_dy = math.atan2(z, y) + z * 0.5, (da + 0.5) * dz_dx, (da + 0.5) * dz_dy + db
        return z, dz_dx, dz_dy

    cf = tg.compile(chain)
    for xv, yv in ((0.5, 0.3), (-1.0, 2.0), (2.0, -0.7)):
        x, y = tg.tensor(xv, requires_grad=True), tg.tensor(yv, requires_grad=True)
        out = cf(x, y)
        out.backward()
        z, gx, gy = reference(xv, yv)
        assert out.item() == pytest.approx(z, rel=1e-14)
        assert x.grad.item() == pytest.approx(gx, rel=1e-13)
        assert y.grad.item() == pytest.approx(gy, rel=1e-13)
    assert cf.stats.replays == 2
    R = cf.cache[next(iter(cf.cache))][0]
    assert R.scalar is True         # the generated binary_forward1 computed atan2, not NumPy
