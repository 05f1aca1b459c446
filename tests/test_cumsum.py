"""tg.cumsum / Tensor.cumsum: one section of ops/reduce.py (a per-row op like
softmax), checked through every path: eager values and dtypes, PyTorch's errors,
the compiled and the interpreted reverse, create_graph, and tg.compile /
tg.record replays."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core import tape
from tapegrad.core.registry import OPCODES

X = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_values_and_grad_fn():
    x = tg.tensor(X, requires_grad=True)
    y = tg.cumsum(x, 1)
    assert y.grad_fn.name() == "CumsumBackward0"
    assert y.tolist() == [[1.0, 3.0, 6.0], [4.0, 9.0, 15.0]]
    assert tg.cumsum(x, 0).tolist() == [[1.0, 2.0, 3.0], [5.0, 7.0, 9.0]]
    assert tg.cumsum(x, -1).tolist() == y.tolist()
    assert x.cumsum(0).tolist() == [[1.0, 2.0, 3.0], [5.0, 7.0, 9.0]]
    assert x.cumsum(dim=1).tolist() == y.tolist()
    assert tg.cumsum(x, axis=1).tolist() == y.tolist()      # (PyTorch's NumPy spelling)
    s = tg.tensor(3.0, requires_grad=True)
    for d in (0, -1):
        z = tg.cumsum(s, d)
        assert z.shape == () and z.item() == 3.0 and z.grad_fn.name() == "CumsumBackward0"
    assert tg.cumsum(tg.zeros(0, 3), 1).shape == (0, 3)


def test_dtypes():
    x = tg.tensor([[1, 2], [3, 4]])
    assert tg.cumsum(x, 0).tolist() == [[1, 2], [4, 6]] and tg.cumsum(x, 1).dtype == tg.int64
    assert tg.cumsum(tg.tensor([True, True]), 0).tolist() == [1, 2]
    assert tg.cumsum(tg.tensor([True, True]), 0).dtype == tg.int64
    assert tg.cumsum(tg.tensor([1, 2], dtype=tg.int8), 0).dtype == tg.int64
    assert tg.cumsum(tg.tensor([200, 100], dtype=tg.uint8), 0).tolist() == [200, 300]
    assert tg.cumsum(tg.tensor(3), 0).dtype == tg.int64
    f = tg.cumsum(x, -1, dtype=tg.float32)
    assert f.dtype == tg.float32 and f.tolist() == [[1.0, 3.0], [3.0, 7.0]]
    i = tg.cumsum(tg.tensor([1.5, 2.0], dtype=tg.float32), 0, dtype=tg.int32)     # cast first: 1 + 2
    assert i.dtype == tg.int32 and i.tolist() == [1, 3]
    assert tg.cumsum(tg.tensor([1.0, 2.0], dtype=tg.float16), 0, dtype=tg.float64).dtype == tg.float64
    assert tg.cumsum(tg.tensor([1.0, 2.0], dtype=tg.float32), 0).dtype == tg.float32


def test_errors():
    x = tg.tensor(X)
    out_of_range = r"^Dimension out of range \(expected to be in range of \[%d, %d\], but got %d\)$"
    with pytest.raises(IndexError, match=out_of_range % (-2, 1, 2)):
        tg.cumsum(x, 2)
    with pytest.raises(IndexError, match=out_of_range % (-2, 1, -3)):
        x.cumsum(-3)
    with pytest.raises(IndexError, match=out_of_range % (-1, 0, 1)):
        tg.cumsum(tg.tensor(3.0), 1)
    with pytest.raises(TypeError, match=r'^cumsum\(\) missing 1 required positional arguments: "dim"$'):
        tg.cumsum(x)


def test_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    xv = rng.standard_normal((2, 3, 4))
    for dim in (0, 1, 2, -1, -3):
        x = tg.tensor(xv, requires_grad=True)
        xt = torch.tensor(xv, requires_grad=True)
        w = rng.standard_normal(xv.shape)
        y, yt = tg.cumsum(x, dim), torch.cumsum(xt, dim)
        (y * tg.tensor(w)).sum().backward()
        (yt * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-14)
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-13, atol=1e-14)
    for data, kw in (([[1, 2], [3, 4]], {}), ([True, False, True], {}), ([1.5, 2.0], {"dtype": "int32"}),
                     ([1, 2], {"dtype": "float32"})):
        got = tg.cumsum(tg.tensor(data), 0, **{k: np.dtype(v) for k, v in kw.items()})
        want = torch.cumsum(torch.tensor(data), 0, **{k: getattr(torch, v) for k, v in kw.items()})
        assert got.dtype.name == str(want.dtype)[6:] and got.tolist() == want.tolist()
    for bad in (lambda m, x: m.cumsum(x, 2), lambda m, x: m.cumsum(x, -3), lambda m, x: m.cumsum(x)):
        msgs = []
        for m, x in ((tg, tg.tensor(X)), (torch, torch.tensor(X))):
            with pytest.raises((IndexError, TypeError)) as e:
                bad(m, x)
            msgs.append((e.type, str(e.value)))
        assert msgs[0] == msgs[1]


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gradient_compiled_and_interpreted(reverse, dim):
    # "never": reduce.py's cumsum_reverse in the compiled sweep; "always": the NumPy walk
    x = tg.tensor(X, requires_grad=True)
    w = tg.tensor([[1.0, 10.0, 100.0], [1000.0, 10000.0, 100000.0]])
    (tg.cumsum(x, dim) * w).sum().backward()
    # each element's gradient: the sum of w from it to the end of its row along dim
    want = {0: [[1001.0, 10010.0, 100100.0], [1000.0, 10000.0, 100000.0]],
            1: [[111.0, 110.0, 100.0], [111000.0, 110000.0, 100000.0]]}[dim % 2]
    assert x.grad.tolist() == want


def test_zero_dim_and_one_element_rows(reverse):
    s = tg.tensor(3.0, requires_grad=True)
    (tg.cumsum(s, 0) * 2.0).backward()
    assert s.grad.item() == 2.0
    x = tg.tensor([[1.0], [2.0]], requires_grad=True)
    (tg.cumsum(x, 1) * tg.tensor([[3.0], [4.0]])).sum().backward()
    assert x.grad.tolist() == [[3.0], [4.0]]


@pytest.mark.parametrize("shape,dim", [((5,), 0), ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), 1), ((2, 3, 4), -1),
                                       ((), 0)], ids=str)
def test_gradcheck_and_gradgradcheck(shape, dim):
    x = tg.tensor(np.random.default_rng(len(shape)).standard_normal(shape), requires_grad=True)
    assert tg.autograd.gradcheck(lambda t: tg.cumsum(t, dim), (x,))
    # cumsum is linear: its second derivative shows through a product
    assert tg.autograd.gradgradcheck(lambda t: tg.cumsum(t, dim) * t, (x,))


def test_create_graph_second_derivative():
    # f = sum(cumsum(x)^2), x = [1, 2, 3]: cumsum [1, 3, 6]; df/dx_i = 2 * sum_{j >= i} c_j = [20, 18, 12];
    # the Hessian is 2 * (3 - max(i, j)), so d(sum df/dx)/dx = [12, 10, 6]
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (g,) = tg.autograd.grad((tg.cumsum(x, 0) ** 2).sum(), x, create_graph=True)
    assert g.tolist() == [20.0, 18.0, 12.0] and g.requires_grad
    (h,) = tg.autograd.grad(g.sum(), x)
    assert h.tolist() == [12.0, 10.0, 6.0]
    y = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)       # along dim 0 of a matrix
    (g,) = tg.autograd.grad((tg.cumsum(y, 0) ** 2).sum(), y, create_graph=True)
    assert g.tolist() == [[10.0, 16.0], [8.0, 12.0]]
    (h,) = tg.autograd.grad(g.sum(), y)
    assert h.tolist() == [[6.0, 6.0], [4.0, 4.0]]     # (per column: Hessian 2 * (2 - max(i, j)))


def _body(x, w):
    return (tg.cumsum(x * w, -1) ** 2).sum() + tg.cumsum(x, 0).sum()


def _expected(xv, wv):
    c = np.cumsum(xv * wv, -1)
    value = (c ** 2).sum() + np.cumsum(xv, 0).sum()
    rev = np.flip(np.cumsum(np.flip(2 * c, -1), -1), -1)        # reverse cumulative sums
    ones_rev = np.flip(np.cumsum(np.ones_like(xv), 0), 0)
    return value, rev * wv + ones_rev, (rev * xv).sum(0)


def test_compile_replays_with_new_inputs():
    cf = tg.compile(_body)
    rng = np.random.default_rng(2)
    for _ in range(3):
        xv, wv = rng.standard_normal((3, 4)), rng.standard_normal(4)
        x, w = tg.tensor(xv, requires_grad=True), tg.tensor(wv, requires_grad=True)
        out = cf(x, w)
        out.backward()
        value, gx, gw = _expected(xv, wv)
        assert out.item() == pytest.approx(value, rel=1e-13)
        np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-12)
        np.testing.assert_allclose(w.grad.numpy(), gw, rtol=1e-12)
    assert cf.stats.recordings == 1 and cf.stats.replays == 2


def test_record_replays_with_new_inputs():
    rng = np.random.default_rng(4)
    tape = tg.record(_body, rng.standard_normal((3, 4)), rng.standard_normal(4))
    xv, wv = rng.standard_normal((3, 4)), rng.standard_normal(4)
    v, (gx, gw) = tape.value_and_grad(xv, wv)
    value, ex, ew = _expected(xv, wv)
    assert v == pytest.approx(value, rel=1e-13)
    np.testing.assert_allclose(gx, ex, rtol=1e-12)
    np.testing.assert_allclose(gw, ew, rtol=1e-12)


def test_last_axis_cumsum_replays_in_the_compiled_forward():
    from tapegrad import _jit
    _jit.load()         # (the compiled replay of arrays runs once the kernels are loaded)

    def body(x):
        return (tg.cumsum(x, -1) ** 2).sum()
    cf = tg.compile(body)
    for i in range(3):
        xv = np.arange(12.0).reshape(3, 4) - 4.0 * i
        x = tg.tensor(xv, requires_grad=True)
        out = cf(x)
        out.backward()
        c = np.cumsum(xv, -1)
        assert out.item() == (c ** 2).sum()         # the kernel sums in NumPy's order: the same bits
        np.testing.assert_array_equal(x.grad.numpy(), np.flip(np.cumsum(np.flip(2 * c, -1), -1), -1))
    (entry,) = [v for v in cf.cache.values() if isinstance(v, list)]
    R = entry[0]
    assert R.arena is True
    cumsum_entries = [s for s, row in enumerate(R.rows) if row[tape.OP] == OPCODES["cumsum"]]
    assert len(cumsum_entries) == 1 and R.known[cumsum_entries[0]] == 1     # computed by reduce_forward
