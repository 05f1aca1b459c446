"""Gathers and scatters (tapegrad/ops/gathers.py): gather, take_along_dim, take,
index_select, masked_fill, masked_select, scatter, scatter_add, index_add,
index_copy, index_fill, masked_scatter, scatter_reduce and their in-place methods.

Each is a composition of the shape family's flat gather / scatter-add / setitem
kernels and elementwise where, checked here through every path: literal values
and gradients (repeated indices accumulate), PyTorch's values, gradients, dtypes
and errors where torch is installed, gradcheck and gradgradcheck, the compiled and
the interpreted reverse, create_graph, and tg.compile / tg.record replays."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import engine

X = [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]]


def _t(m, v, dtype=None):
    """A tensor of module ``m`` (tapegrad or torch); ints are int64, as in both."""
    return m.tensor(v) if dtype is None else m.tensor(v, dtype=getattr(m, dtype))


# -- the cases: (id, f(m, x, s), x, s) with s a second float input or None ---------------
# Index tensors are made inside f, with module m: the same call runs on tapegrad and torch.
MASK = [[True, False, True, False], [False, False, True, True], [True, True, False, False]]
CASES = [
    ("gather_dim0_repeats", lambda m, x, s: m.gather(x, 0, _t(m, [[0, 1, 2, 0], [2, 2, 1, 0]])), X, None),
    ("gather_dim1_small_index", lambda m, x, s: x.gather(1, _t(m, [[3, 3], [0, 1]])), X, None),
    ("gather_neg_dim", lambda m, x, s: m.gather(x, -1, _t(m, [[1], [1], [0]])), X, None),
    ("take_along_dim", lambda m, x, s: m.take_along_dim(x, _t(m, [[0, 3, 3]]), 1), X, None),
    ("take_along_dim_broadcast_x", lambda m, x, s: m.take_along_dim(x[:1], _t(m, [[0, 2], [1, 1]]), 1), X, None),
    ("take_along_dim_none", lambda m, x, s: x.take_along_dim(_t(m, [[11, 0], [0, 4]])), X, None),
    ("take", lambda m, x, s: m.take(x, _t(m, [[0, -1], [5, 5]])), X, None),
    ("put", lambda m, x, s: m.put(x, _t(m, [0, -1, 5]), s), X, [1.5, 2.5, 3.5]),
    ("put_accumulate", lambda m, x, s: x.put(_t(m, [[0, 0], [5, -1]]), s, accumulate=True), X,
     [[1.5, 2.5], [3.5, 4.5]]),
    ("index_select_dim0", lambda m, x, s: m.index_select(x, 0, _t(m, [2, 0, 2])), X, None),
    ("index_select_dim1_int32", lambda m, x, s: x.index_select(1, _t(m, [3, 3, 1], "int32")), X, None),
    ("masked_fill_number", lambda m, x, s: m.masked_fill(x, _t(m, MASK), -1.5), X, None),
    ("masked_fill_broadcast_mask", lambda m, x, s: x.masked_fill(_t(m, [False, True, True, False]), 0.0), X, None),
    ("masked_fill_tensor_value", lambda m, x, s: x.masked_fill(_t(m, MASK), s), X, 2.5),
    ("masked_select", lambda m, x, s: m.masked_select(x, _t(m, MASK)), X, None),
    ("masked_select_broadcast", lambda m, x, s: m.masked_select(x[0], _t(m, MASK)), X, None),
    # (src of the index's shape: PyTorch's reverse fails for a larger src, tapegrad's gives it zeros there)
    ("scatter_src", lambda m, x, s: m.scatter(x, 0, _t(m, [[0, 1, 2, 0], [1, 2, 0, 2]]), s), X,
     [[0.5, 1.5, 2.5, 3.5], [5.5, 6.5, 7.5, 8.5]]),
    ("scatter_src_dim1", lambda m, x, s: x.scatter(1, _t(m, [[3, 0], [1, 2]]), s), X, [[0.5, 1.5], [2.5, 3.5]]),
    ("scatter_value", lambda m, x, s: x.scatter(1, _t(m, [[3, 0], [1, 1]]), -2.0), X, None),
    ("scatter_add_repeats", lambda m, x, s: m.scatter_add(x, 0, _t(m, [[0, 0, 2, 0], [0, 2, 2, 1]]), s), X,
     [[0.5, 1.5, 2.5, 3.5], [5.5, 6.5, 7.5, 8.5]]),
    ("scatter_add_dim1", lambda m, x, s: x.scatter_add(1, _t(m, [[1, 1, 1], [0, 3, 0]]), s), X,
     [[0.5, 1.5, 2.5], [5.5, 6.5, 7.5]]),
    ("index_add_repeats", lambda m, x, s: m.index_add(x, 0, _t(m, [2, 0, 2]), s), X,
     [[0.5, 1.5, 2.5, 3.5], [5.5, 6.5, 7.5, 8.5], [-1.0, -2.0, -3.0, -4.0]]),
    ("index_add_alpha_dim1", lambda m, x, s: x.index_add(1, _t(m, [3, 3]), s, alpha=2.5), X,
     [[0.5, 1.5], [2.5, 3.5], [4.5, 5.5]]),
    ("index_copy", lambda m, x, s: m.index_copy(x, 1, _t(m, [3, 0]), s), X, [[0.5, 1.5], [2.5, 3.5], [4.5, 5.5]]),
    ("index_copy_dim0_neg_dim", lambda m, x, s: x.index_copy(-2, _t(m, [1]), s), X, [[0.5, 1.5, 2.5, 3.5]]),
    ("index_fill_number", lambda m, x, s: m.index_fill(x, 1, _t(m, [1, 3, 1]), -2.0), X, None),
    ("index_fill_tensor_value", lambda m, x, s: x.index_fill(0, _t(m, [2]), s), X, 4.0),
    ("masked_scatter", lambda m, x, s: x.masked_scatter(_t(m, MASK), s), X, [float(i) for i in range(10)]),
    ("masked_scatter_broadcast", lambda m, x, s: m.masked_scatter(x[1], _t(m, MASK), s), X,
     [[0.5, 1.5, 2.5, 3.5], [4.5, 5.5, 6.5, 7.5]]),
]
_SR_INDEX = [[0, 1, 0, 2], [0, 1, 0, 2], [2, 1, 0, 0]]
_SR_SRC = [[0.25, 3.0, -1.5, 2.0], [0.75, -2.0, 4.5, 1.25], [1.5, 0.5, -3.0, 2.5]]
for _red in ("sum", "prod", "mean", "amax", "amin"):
    for _inc in (True, False):
        CASES.append(("scatter_reduce_%s_%s" % (_red, "self" if _inc else "noself"),
                      (lambda red, inc: lambda m, x, s: m.scatter_reduce(x, 0, _t(m, _SR_INDEX), s, red,
                                                                         include_self=inc))(_red, _inc),
                      X, _SR_SRC))
CASES.append(("scatter_reduce_dim1_method", lambda m, x, s: x.scatter_reduce(1, _t(m, [[3, 3], [0, 1]]), s, "amax"),
              X, [[0.5, 1.5], [6.5, 5.5]]))
IDS = [c[0] for c in CASES]


def _inputs(m, case, rg=True):
    _, f, xv, sv = case
    x = m.tensor(xv, dtype=m.float64, requires_grad=rg)
    s = None if sv is None else m.tensor(sv, dtype=m.float64, requires_grad=rg)
    return f, x, s


# -- literal values and gradients -----------------------------------------------------------
def test_gather_values_and_repeated_indices_accumulate():
    x = tg.tensor(X, requires_grad=True)
    y = tg.gather(x, 0, tg.tensor([[0, 1, 2, 0], [2, 2, 1, 0]]))
    assert y.grad_fn.name() == "GatherBackward0"
    assert y.tolist() == [[1.0, 6.0, 11.0, 4.0], [9.0, 10.0, 7.0, 4.0]]
    y.sum().backward()
    assert x.grad.tolist() == [[1.0, 0.0, 0.0, 2.0], [0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0]]
    assert x.gather(1, tg.tensor([[3, 3], [0, 1]])).tolist() == [[4.0, 4.0], [5.0, 6.0]]
    s = tg.tensor(5.0)
    assert tg.gather(s, 0, tg.tensor(0)).item() == 5.0 and tg.gather(s, 0, tg.tensor(0)).shape == ()
    assert tg.gather(x, 1, tg.zeros(3, 0, dtype=tg.int64)).shape == (3, 0)


def test_take_index_select_take_along_dim_values():
    x = tg.tensor(X, requires_grad=True)
    y = tg.take(x, tg.tensor([[0, -1], [5, 5]]))
    assert y.tolist() == [[1.0, 12.0], [6.0, 6.0]] and y.grad_fn.name() == "TakeBackward0"
    y.sum().backward()
    assert x.grad.tolist() == [[1.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
    z = tg.index_select(x, 1, tg.tensor([3, 3, 1]))
    assert z.tolist() == [[4.0, 4.0, 2.0], [8.0, 8.0, 6.0], [12.0, 12.0, 10.0]]
    assert z.grad_fn.name() == "IndexSelectBackward0"
    x.grad = None
    z.sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0, 0.0, 2.0]] * 3
    assert x.index_select(0, tg.tensor([2, 0], dtype=tg.int32)).tolist() == [X[2], X[0]]
    assert tg.index_select(tg.tensor(7.0), 0, tg.tensor([0])).shape == ()       # (0-d in, 0-d out)
    assert tg.index_select(x, 0, tg.tensor(1)).tolist() == [X[1]]
    assert tg.take_along_dim(x, tg.tensor([[0, 3, 3]]), 1).tolist() == [[1.0, 4.0, 4.0], [5.0, 8.0, 8.0],
                                                                        [9.0, 12.0, 12.0]]
    assert tg.take_along_dim(x, tg.tensor([[11, 0]])).tolist() == [12.0, 1.0]
    # along a dim, PyTorch wraps every index (Python's modulo); flattened, it checks them
    assert tg.take_along_dim(x[:1], tg.tensor([[-9, 9, 4]]), 1).tolist() == [[4.0, 2.0, 1.0]]
    assert tg.gather(x, 1, tg.tensor([[0]], dtype=tg.int32)).tolist() == [[1.0]]        # (int32 too)


def test_masked_fill_and_masked_select_values():
    x = tg.tensor(X, requires_grad=True)
    m = tg.tensor(MASK)
    y = x.masked_fill(m, -1.5)
    assert y.grad_fn.name() == "MaskedFillBackward0"
    assert y.tolist() == [[-1.5, 2.0, -1.5, 4.0], [5.0, 6.0, -1.5, -1.5], [-1.5, -1.5, 11.0, 12.0]]
    v = tg.tensor(2.5, requires_grad=True)
    (x.masked_fill(m, v) * tg.tensor(X)).sum().backward()
    assert v.grad.item() == 1.0 + 3.0 + 7.0 + 8.0 + 9.0 + 10.0     # the filled positions' weights
    assert x.grad.tolist() == [[0.0, 2.0, 0.0, 4.0], [5.0, 6.0, 0.0, 0.0], [0.0, 0.0, 11.0, 12.0]]
    assert tg.masked_fill(tg.tensor([1, 2, 3]), tg.tensor([True, False, True]), 7.9).tolist() == [7, 2, 7]
    assert tg.masked_fill(tg.tensor([1, 2, 3]), tg.tensor([True, False, True]), -7.9).tolist() == [-7, 2, -7]
    f32 = tg.masked_fill(tg.tensor([1.0, 2.0], dtype=tg.float32), tg.tensor([True, False]), tg.tensor(2.5))
    assert f32.dtype == tg.float32 and f32.tolist() == [2.5, 2.0]      # (the value takes x's dtype)
    big = x.masked_fill(tg.ones(2, 3, 4, dtype=tg.bool), 0.0)     # out of place, x broadcasts to the mask
    assert big.shape == (2, 3, 4) and big.sum().item() == 0.0
    assert x.masked_fill(m, v).grad_fn.name() == "MaskedFillBackward1"
    s = tg.masked_select(x, m)
    assert s.tolist() == [1.0, 3.0, 7.0, 8.0, 9.0, 10.0] and s.grad_fn.name() == "MaskedSelectBackward0"
    assert tg.masked_select(x[0], m).tolist() == [1.0, 3.0, 3.0, 4.0, 1.0, 2.0]
    x.grad = None
    tg.masked_select(x[0], m).sum().backward()
    assert x.grad.tolist() == [[2.0, 1.0, 2.0, 1.0], [0.0] * 4, [0.0] * 4]


def test_scatter_values_and_gradients():
    x = tg.tensor(X, requires_grad=True)
    src = tg.tensor([[0.5, 1.5, 2.5, 3.5, 4.5], [5.5, 6.5, 7.5, 8.5, 9.5]], requires_grad=True)
    y = tg.scatter(x, 0, tg.tensor([[0, 1, 2, 0], [1, 2, 0, 2]]), src)
    assert y.grad_fn.name() == "ScatterBackward0"
    assert y.tolist() == [[0.5, 2.0, 7.5, 3.5], [5.5, 1.5, 7.0, 8.0], [9.0, 6.5, 2.5, 8.5]]
    (y * tg.tensor(X)).sum().backward()
    assert x.grad.tolist() == [[0.0, 2.0, 0.0, 0.0], [0.0, 0.0, 7.0, 8.0], [9.0, 0.0, 0.0, 0.0]]    # overwritten: 0
    assert src.grad.tolist() == [[1.0, 6.0, 11.0, 4.0, 0.0], [5.0, 10.0, 3.0, 12.0, 0.0]]
    assert x.scatter(1, tg.tensor([[3, 0], [1, 1]]), -2.0).tolist() == [[-2.0, 2.0, 3.0, -2.0],
                                                                        [5.0, -2.0, 7.0, 8.0], X[2]]


def test_scatter_add_index_add_accumulate():
    x = tg.tensor(X, requires_grad=True)
    src = tg.tensor([[0.5, 1.5, 2.5, 3.5], [5.5, 6.5, 7.5, 8.5]], requires_grad=True)
    y = tg.scatter_add(x, 0, tg.tensor([[0, 0, 2, 0], [0, 2, 2, 1]]), src)
    assert y.grad_fn.name() == "ScatterAddBackward0"
    assert y.tolist() == [[7.0, 3.5, 3.0, 7.5], [5.0, 6.0, 7.0, 16.5], [9.0, 16.5, 21.0, 12.0]]
    (y * tg.tensor(X)).sum().backward()
    assert x.grad.tolist() == X
    assert src.grad.tolist() == [[1.0, 2.0, 11.0, 4.0], [1.0, 10.0, 11.0, 8.0]]   # = gather(w, 0, index)
    x = tg.tensor(X, requires_grad=True)
    s = tg.tensor([[1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0], [-1.0, -1.0, -1.0, -1.0]], requires_grad=True)
    z = x.index_add(0, tg.tensor([2, 0, 2]), s, alpha=2.0)
    assert z.grad_fn.name() == "IndexAddBackward0"
    assert z.tolist() == [[21.0, 42.0, 63.0, 84.0], X[1], [9.0, 12.0, 15.0, 18.0]]
    (z * tg.tensor(X)).sum().backward()
    assert s.grad.tolist() == [[18.0, 20.0, 22.0, 24.0], [2.0, 4.0, 6.0, 8.0], [18.0, 20.0, 22.0, 24.0]]
    ints = tg.tensor([[1, 2], [3, 4]])
    assert tg.index_add(ints, 1, tg.tensor([0, 0]), ints).tolist() == [[4, 2], [10, 4]]
    assert tg.scatter_add(ints, 0, tg.tensor([[1, 1]]), ints).tolist() == [[1, 2], [4, 6]]


def test_index_copy_index_fill_masked_scatter_values():
    x = tg.tensor(X, requires_grad=True)
    s = tg.tensor([[0.5, 1.5], [2.5, 3.5], [4.5, 5.5]], requires_grad=True)
    y = tg.index_copy(x, 1, tg.tensor([3, 0]), s)
    assert y.grad_fn.name() == "IndexCopyBackward0"
    assert y.tolist() == [[1.5, 2.0, 3.0, 0.5], [3.5, 6.0, 7.0, 2.5], [5.5, 10.0, 11.0, 4.5]]
    (y * tg.tensor(X)).sum().backward()
    assert x.grad.tolist() == [[0.0, 2.0, 3.0, 0.0], [0.0, 6.0, 7.0, 0.0], [0.0, 10.0, 11.0, 0.0]]
    assert s.grad.tolist() == [[4.0, 1.0], [8.0, 5.0], [12.0, 9.0]]
    f = x.index_fill(1, tg.tensor([1, 3, 1]), -2.0)
    assert f.grad_fn.name() == "IndexFillBackward0"
    assert f.tolist() == [[1.0, -2.0, 3.0, -2.0], [5.0, -2.0, 7.0, -2.0], [9.0, -2.0, 11.0, -2.0]]
    src = tg.tensor([float(i) for i in range(10)], requires_grad=True)
    ms = x.masked_scatter(tg.tensor(MASK), src)
    assert ms.grad_fn.name() == "MaskedScatterBackward0"
    assert ms.tolist() == [[0.0, 2.0, 1.0, 4.0], [5.0, 6.0, 2.0, 3.0], [4.0, 5.0, 11.0, 12.0]]
    ms.sum().backward()
    assert src.grad.tolist() == [1.0] * 6 + [0.0] * 4


def test_put_values_and_gradients():
    x = tg.tensor(X, requires_grad=True)
    s = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = tg.put(x, tg.tensor([0, -1, 5]), s)
    assert y.grad_fn.name() == "PutBackward0"
    assert y.tolist() == [[1.0, 2.0, 3.0, 4.0], [5.0, 3.0, 7.0, 8.0], [9.0, 10.0, 11.0, 2.0]]
    z = x.put(tg.tensor([0, 0]), s[:2], accumulate=True)
    assert z.tolist()[0] == [4.0, 2.0, 3.0, 4.0]
    z.sum().backward()
    assert x.grad.tolist() == [[1.0] * 4] * 3 and s.grad.tolist() == [1.0, 1.0, 0.0]


def test_scatter_reduce_values_and_gradients():
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    idx = tg.tensor([0, 0, 2, 2, 2])
    src = tg.tensor([4.0, 4.0, 0.0, 5.0, 2.0], requires_grad=True)
    want = {("sum", True): [9.0, 2.0, 10.0], ("sum", False): [8.0, 2.0, 7.0],
            ("prod", True): [16.0, 2.0, 0.0], ("prod", False): [16.0, 2.0, 0.0],
            ("mean", True): [3.0, 2.0, 2.5], ("mean", False): [4.0, 2.0, 7.0 / 3.0],
            ("amax", True): [4.0, 2.0, 5.0], ("amax", False): [4.0, 2.0, 5.0],
            ("amin", True): [1.0, 2.0, 0.0], ("amin", False): [4.0, 2.0, 0.0]}
    for (red, inc), v in want.items():
        y = tg.scatter_reduce(x, 0, idx, src, red, include_self=inc)
        assert y.grad_fn.name() == "ScatterReduceBackward0"
        assert y.tolist() == pytest.approx(v, rel=1e-15)
    # gradients: amax's tie at position 0 splits evenly; prod's one zero gets the product of the others
    x.grad = src.grad = None
    tg.scatter_reduce(x, 0, idx, src, "amax", include_self=False).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0] and src.grad.tolist() == [0.5, 0.5, 0.0, 1.0, 0.0]
    x.grad = src.grad = None
    tg.scatter_reduce(x, 0, idx, src, "prod").sum().backward()
    assert x.grad.tolist() == [16.0, 1.0, 0.0] and src.grad.tolist() == [4.0, 4.0, 30.0, 0.0, 0.0]
    ints = tg.tensor([1, 2, 3])
    assert tg.scatter_reduce(ints, 0, tg.tensor([0, 0]), tg.tensor([4, 4]), "mean").tolist() == [3, 2, 3]
    assert tg.scatter_reduce(ints, 0, tg.tensor([2, 2]), tg.tensor([-4, 9]), "amin", include_self=False).tolist() \
        == [1, 2, -4]


def test_inplace_methods():
    x = tg.tensor(X, requires_grad=True)
    y = x * 1.0
    r = y.masked_fill_(tg.tensor(MASK), 0.0)
    assert r is y and y.grad_fn.name() == "MaskedFillBackward0"
    assert y.tolist() == [[0.0, 2.0, 0.0, 4.0], [5.0, 6.0, 0.0, 0.0], [0.0, 0.0, 11.0, 12.0]]
    y.scatter_add_(1, tg.tensor([[0, 0]]), tg.tensor([[1.0, 2.0]]))
    assert y.tolist()[0] == [3.0, 2.0, 0.0, 4.0]
    y.index_add_(0, tg.tensor([2]), tg.ones(1, 4))
    y.index_copy_(1, tg.tensor([1]), tg.zeros(3, 1))
    y.index_fill_(0, tg.tensor([1]), 9.0)
    y.scatter_(1, tg.tensor([[3]]), 7.0)
    y.masked_scatter_(tg.tensor([False, False, False, True]), tg.tensor([-1.0, -2.0, -3.0]))
    y.put_(tg.tensor([2]), tg.tensor([5.0]), accumulate=True)     # (0, 2): 0 + 5, then doubled below
    y.scatter_reduce_(0, tg.tensor([[0, 0, 0, 0]]), tg.tensor([[2.0, 2.0, 2.0, 2.0]]), "prod")
    assert y.tolist() == [[6.0, 0.0, 10.0, -2.0], [9.0, 9.0, 9.0, -2.0], [1.0, 0.0, 12.0, -3.0]]
    y.sum().backward()
    # what survives of x: (2, 2) only (the rest masked, copied over, filled or scattered into)
    assert x.grad.tolist() == [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        x.masked_fill_(tg.tensor(MASK), 0.0)


# -- against PyTorch ---------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_and_gradients_match_torch(case):
    torch = pytest.importorskip("torch")
    f, x, s = _inputs(tg, case)
    ft, xt, st = _inputs(torch, case)
    y, yt = f(tg, x, s), ft(torch, xt, st)
    assert y.shape == tuple(yt.shape) and y.dtype.name == str(yt.dtype)[6:]
    assert y.grad_fn.name() == yt.grad_fn.name()
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-15, atol=0)
    w = np.random.default_rng(len(case[0])).standard_normal(yt.shape)
    (y * tg.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-14, atol=1e-15)
    if s is not None:
        np.testing.assert_allclose(s.grad.numpy(), st.grad.numpy(), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_float32_matches_torch(case):
    # float32 stays float32 (a float64 0-d value is cast to x's dtype); sums may round differently
    torch = pytest.importorskip("torch")
    _, f, xv, sv = case
    outs = []
    for m in (tg, torch):
        x = m.tensor(xv, dtype=m.float32, requires_grad=True)
        s = None if sv is None else m.tensor(sv, dtype=m.float32 if np.ndim(sv) else m.float64, requires_grad=True)
        y = f(m, x, s)
        (y * y).sum().backward()
        outs.append((y, x.grad, None if s is None else s.grad))
    (y, gx, gs), (yt, gxt, gst) = outs
    assert y.dtype == tg.float32 and str(yt.dtype) == "torch.float32"
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(gx.numpy(), gxt.numpy(), rtol=1e-5, atol=1e-6)
    if gs is not None:
        assert gs.dtype.name == str(gst.dtype)[6:]
        np.testing.assert_allclose(gs.numpy(), gst.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_integer_inputs_match_torch(case):
    # no gradient: values in the integer dtype (scatter_reduce's mean floors, fill values truncate)
    torch = pytest.importorskip("torch")
    _, f, xv, sv = case
    outs = []
    for m in (tg, torch):
        x = m.tensor((np.asarray(xv) * 3 - 17).astype(np.int64).tolist())
        s = None if sv is None else m.tensor((np.asarray(sv) * 4).astype(np.int64).tolist())
        outs.append(f(m, x, s))
    assert outs[0].dtype == tg.int64 and str(outs[1].dtype) == "torch.int64"
    assert outs[0].tolist() == outs[1].tolist()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradcheck_and_gradgradcheck(case):
    _, f, xv, sv = case
    rng = np.random.default_rng(len(case[0]))
    # distinct values (no ties for amax/amin, no zeros for prod): the op is smooth there
    x = tg.tensor(np.asarray(xv) + rng.uniform(0.1, 0.2, np.shape(xv)), requires_grad=True)
    args = (x,) if sv is None else (x, tg.tensor(np.asarray(sv) + rng.uniform(0.1, 0.2, np.shape(sv)),
                                                 requires_grad=True))
    g = (lambda a: f(tg, a, None)) if sv is None else (lambda a, b: f(tg, a, b))
    assert tg.autograd.gradcheck(g, args)
    # linear ops show their second derivative through a product
    h = (lambda *a: g(*a) * g(*a))
    assert tg.autograd.gradgradcheck(h, args)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_compiled_and_interpreted_reverse_agree(case, reverse, monkeypatch):
    # "never": the compiled sweep (the shape family's kernels); "always": the NumPy walk
    f, x, s = _inputs(tg, case)
    w = tg.tensor(np.random.default_rng(3).standard_normal(f(tg, x, s).shape))
    (f(tg, x, s) * w).sum().backward()
    monkeypatch.setattr(engine, "INTERPRET", ["always"])
    f2, x2, s2 = _inputs(tg, case)
    (f2(tg, x2, s2) * w).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-15, atol=0)
    if s is not None:
        np.testing.assert_allclose(s.grad.numpy(), s2.grad.numpy(), rtol=1e-15, atol=0)


def test_create_graph_second_derivative():
    # f = sum(gather(x, 0, [0, 0, 1])^2) = 2 x0^2 + x1^2: df/dx = [4 x0, 2 x1], d(sum df/dx)/dx = [4, 2]
    x = tg.tensor([3.0, 5.0], requires_grad=True)
    (g,) = tg.autograd.grad((tg.gather(x, 0, tg.tensor([0, 0, 1])) ** 2).sum(), x, create_graph=True)
    assert g.tolist() == [12.0, 10.0] and g.requires_grad
    (h,) = tg.autograd.grad(g.sum(), x)
    assert h.tolist() == [4.0, 2.0]
    # scatter_add: f = sum(y^2), y = [x0 + s0 + s1, x1]
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    s = tg.tensor([3.0, 4.0], requires_grad=True)
    y = tg.scatter_add(x, 0, tg.tensor([0, 0]), s)
    gx, gs = tg.autograd.grad((y ** 2).sum(), (x, s), create_graph=True)
    assert gx.tolist() == [16.0, 4.0] and gs.tolist() == [16.0, 16.0]
    (h,) = tg.autograd.grad(gs.sum(), s)
    assert h.tolist() == [4.0, 4.0]


# -- replay ---------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_compile_replays_with_new_inputs(case):
    f, _, _ = _inputs(tg, case)
    has_s = case[3] is not None
    cf = tg.compile((lambda x, s: (f(tg, x, s) ** 2).sum()) if has_s else (lambda x: (f(tg, x, None) ** 2).sum()))
    rng = np.random.default_rng(1)
    for _ in range(3):
        xv = np.asarray(case[2]) + rng.standard_normal(np.shape(case[2]))
        sv = None if not has_s else np.asarray(case[3]) + rng.standard_normal(np.shape(case[3]))
        args = [tg.tensor(xv, requires_grad=True)] + ([tg.tensor(sv, requires_grad=True)] if has_s else [])
        out = cf(*args)
        out.backward()
        eager = [tg.tensor(xv, requires_grad=True)] + ([tg.tensor(sv, requires_grad=True)] if has_s else [])
        ref = (f(tg, eager[0], eager[1] if has_s else None) ** 2).sum()
        ref.backward()
        assert out.item() == pytest.approx(ref.item(), rel=1e-14)
        for a, e in zip(args, eager):
            np.testing.assert_allclose(a.grad.numpy(), e.grad.numpy(), rtol=1e-14, atol=1e-14)
    assert cf.stats.recordings == 1 and cf.stats.replays == 2


def test_index_argument_is_a_guard_in_replay():
    # an index passed as an argument: a replay with other indices records again, never reuses them
    cf = tg.compile(lambda x, i: (tg.gather(x, 1, i) * tg.tensor([[1.0, 10.0]])).sum())
    x = tg.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    for idx, want, grad in (([[0, 1]], 21.0, [[1.0, 10.0, 0.0]]), ([[0, 1]], 21.0, [[1.0, 10.0, 0.0]]),
                            ([[2, 2]], 33.0, [[0.0, 0.0, 11.0]])):
        x.grad = None
        y = cf(x, tg.tensor(idx))
        y.backward()
        assert y.item() == want and x.grad.tolist() == grad
    assert cf.stats.replays == 1 and cf.stats.recordings == 2
    # an index argument after a plain number: its guard is on that argument (it once read another one)
    cd = tg.compile(lambda x, d, i: tg.scatter_add(x, d, i, tg.ones(1, 2, requires_grad=True)).sum())
    for idx in ([[0, 2]], [[0, 2]], [[1, 1]]):
        assert cd(x, 1, tg.tensor(idx)).item() == 8.0
    assert cd.stats.replays == 1 and cd.stats.recordings == 2
    # a mask computed from the inputs: guarded by its recomputed values
    cm = tg.compile(lambda x: tg.masked_select(x, x > 2.0).sum())
    for v, want in (([1.0, 3.0, 5.0], 8.0), ([4.0, 3.0, 0.0], 7.0), ([5.0, 1.0, 9.0], 14.0)):
        assert cm(tg.tensor(v, requires_grad=True)).item() == want
    cw = tg.compile(lambda x: x.masked_fill(x > 2.0, 0.0).sum())     # where's condition is an input: replayed
    for v, want in (([1.0, 3.0, 5.0], 1.0), ([4.0, 2.0, 0.5], 2.5)):
        assert cw(tg.tensor(v, requires_grad=True)).item() == want
    assert cw.stats.replays == 1


def test_record_replays_with_new_inputs():
    def body(x, s):
        i = tg.tensor([[0, 2, 2, 1]])
        return (tg.scatter_add(x, 0, i, s) ** 2).sum() + tg.gather(x, 0, i).sum() + tg.masked_fill(
            x, tg.tensor(MASK), 1.0).prod()
    rng = np.random.default_rng(4)
    tape = tg.record(body, rng.standard_normal((3, 4)), rng.standard_normal((1, 4)))
    xv, sv = rng.standard_normal((3, 4)), rng.standard_normal((1, 4))
    v, (gx, gs) = tape.value_and_grad(xv, sv)
    x, s = tg.tensor(xv, requires_grad=True), tg.tensor(sv, requires_grad=True)
    ref = body(x, s)
    ref.backward()
    assert v == pytest.approx(ref.item(), rel=1e-14)
    np.testing.assert_allclose(gx, x.grad.numpy(), rtol=1e-13)
    np.testing.assert_allclose(gs, s.grad.numpy(), rtol=1e-13)


# -- errors ---------------------------------------------------------------------------------
BAD = [
    ("gather_int16_index", lambda m, x: m.gather(x, 0, _t(m, [[0]], "int16")), RuntimeError,
     "gather(): Expected dtype int32/int64 for index"),
    ("gather_list_index", lambda m, x: m.gather(x, 1, [[0]]), TypeError,
     "gather(): argument 'index' (position 3) must be Tensor, not list"),
    ("gather_out_of_range", lambda m, x: m.gather(x, 1, _t(m, [[4]])), RuntimeError,
     "index 4 is out of bounds for dimension 1 with size 4"),
    ("gather_negative", lambda m, x: m.gather(x, 1, _t(m, [[-1]])), RuntimeError,
     "index -1 is out of bounds for dimension 1 with size 4"),
    ("gather_ndim", lambda m, x: m.gather(x, 1, _t(m, [0])), RuntimeError,
     "Index tensor must have the same number of dimensions as input tensor"),
    ("gather_too_large", lambda m, x: m.gather(x, 1, _t(m, [[0]] * 4)), RuntimeError,
     "Size does not match at dimension 0 expected index [4, 1] to be no larger than self [3, 4] apart from "
     "dimension 1"),
    ("gather_dim", lambda m, x: m.gather(x, 2, _t(m, [[0]])), IndexError,
     "Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
    ("take_out_of_range", lambda m, x: m.take(x, _t(m, [12])), IndexError,
     "out of range: tried to access index 12 on a tensor of 12 elements."),
    ("take_int32", lambda m, x: m.take(x, _t(m, [1], "int32")), RuntimeError,
     "take(): Expected a long tensor for index, but got Int"),
    ("take_along_dim_int32", lambda m, x: m.take_along_dim(x, _t(m, [[0]], "int32"), 1), RuntimeError,
     "torch.take_along_dim(): dtype of indices should be Long but got Int"),
    ("take_along_dim_shapes", lambda m, x: m.take_along_dim(x, _t(m, [[0], [0]]), 1), RuntimeError,
     "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 0"),
    ("take_along_dim_flat_negative", lambda m, x: m.take_along_dim(x, _t(m, [-1])), RuntimeError,
     "index -1 is out of bounds for dimension 0 with size 12"),
    ("take_along_dim_ndim", lambda m, x: m.take_along_dim(x, _t(m, [0]), 1), RuntimeError,
     "torch.take_along_dim(): input and indices should have the same number of dimensions, but got 2 "
     "dimensions for input, and 1 dimensions for indices"),
    ("put_int32", lambda m, x: m.put(x, _t(m, [0], "int32"), _t(m, [1.0], "float64")), RuntimeError,
     "put_(): Expected a long tensor for index, but got Int"),
    ("put_count", lambda m, x: x.put(_t(m, [0, 1]), _t(m, [1.0, 2.0, 3.0], "float64")), IndexError,
     "put_(): Expected source and index to have the same number of elements, but got source.numel() = 3, "
     "index.numel() = 2"),
    ("put_out_of_range", lambda m, x: x.put(_t(m, [12]), _t(m, [1.0], "float64")), IndexError,
     "out of range: tried to access index 12 on a tensor of 12 elements."),
    ("put_dtype", lambda m, x: x.put(_t(m, [0]), _t(m, [1.0], "float32")), RuntimeError,
     "put_(): self and source expected to have the same dtype, but got self.dtype = Double and source.dtype = Float"),
    ("index_select_out_of_range", lambda m, x: m.index_select(x, 0, _t(m, [3])), IndexError,
     "index out of range in self"),
    ("index_select_matrix", lambda m, x: m.index_select(x, 0, _t(m, [[0]])), IndexError,
     "index_select(): Index is supposed to be a vector"),
    ("index_select_float", lambda m, x: m.index_select(x, 0, _t(m, [0.0])), RuntimeError,
     "index_select(): Expected dtype int32 or int64 for index"),
    ("masked_fill_int_mask", lambda m, x: m.masked_fill(x, _t(m, [1, 0, 1, 0]), 0.0), RuntimeError,
     "masked_fill_ only supports boolean masks, but got mask with dtype long int"),
    ("masked_fill_1d_value", lambda m, x: x.masked_fill(_t(m, [True, False, True, False]), _t(m, [1.0])),
     RuntimeError, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 dimension(s)."),
    ("masked_fill_bad_shape", lambda m, x: x.masked_fill(_t(m, [True, False, True]), 0.0), RuntimeError,
     "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"),
    ("masked_fill_overflow", lambda m, x: m.masked_fill(_t(m, [1, 2], "int8"), _t(m, [True, False]), 300),
     RuntimeError, "value cannot be converted to type int8_t without overflow"),
    ("masked_fill_inf_into_int", lambda m, x: m.masked_fill(_t(m, [1, 2]), _t(m, [True, False]), float("inf")),
     RuntimeError, "value cannot be converted to type int64_t without overflow"),
    ("masked_fill_uint8_mask", lambda m, x: x.masked_fill(_t(m, [1, 0, 1, 0], "uint8"), 0.0), RuntimeError,
     "masked_fill_ only supports boolean masks, but got mask with dtype unsigned char"),
    ("masked_fill__broadcast", lambda m, x: x.masked_fill_(m.ones(2, 3, 4, dtype=m.bool), 0.0), RuntimeError,
     "output with shape [3, 4] doesn't match the broadcast shape [2, 3, 4]"),
    ("masked_select_bad_shape", lambda m, x: m.masked_select(x, _t(m, [True, False, True])), RuntimeError,
     "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"),
    ("masked_select_int_mask", lambda m, x: m.masked_select(x, _t(m, [1, 0, 1, 0])), RuntimeError,
     "masked_select: expected BoolTensor for mask"),
    ("scatter_out_of_range", lambda m, x: x.scatter(0, _t(m, [[3]]), 1.0), RuntimeError,
     "index 3 is out of bounds for dimension 0 with size 3"),
    ("scatter_dtype", lambda m, x: x.scatter(0, _t(m, [[0]]), _t(m, [[1.0]], "float32")), RuntimeError,
     "scatter(): Expected self.dtype to be equal to src.dtype"),
    ("scatter_add_int16", lambda m, x: x.scatter_add(0, _t(m, [[0]], "int16"), x), RuntimeError,
     "scatter(): Expected dtype int32/int64 for index"),
    ("scatter_add_dtype", lambda m, x: x.scatter_add(0, _t(m, [[0]]), x.float()), RuntimeError,
     "scatter(): Expected self.dtype to be equal to src.dtype"),
    ("scatter_value_index_too_large", lambda m, x: x.scatter(0, _t(m, [[0] * 5]), 1.0), RuntimeError,
     "Expected index [1, 5] to be no larger than self [3, 4] apart from dimension 0"),
    ("scatter_ndim", lambda m, x: x.scatter(0, _t(m, [0]), 1.0), RuntimeError,
     "Index tensor must have the same number of dimensions as self tensor"),
    ("scatter_0d_src", lambda m, x: x.scatter(0, _t(m, [[0]]), _t(m, 1.0, "float64")), RuntimeError,
     "Index tensor must have the same number of dimensions as src tensor"),
    ("scatter_negative", lambda m, x: x.scatter_add(0, _t(m, [[-1]]), x), RuntimeError,
     "index -1 is out of bounds for dimension 0 with size 3"),
    ("scatter_src_small", lambda m, x: x.scatter(0, _t(m, [[0, 1]]), _t(m, [[1.0]], "float64")), RuntimeError,
     "Expected index [1, 2] to be no larger than self [3, 4] apart from dimension 0 and to be no larger size "
     "than src [1, 1]"),
    ("index_add_count", lambda m, x: x.index_add(0, _t(m, [0, 1]), x), RuntimeError,
     "index_add_(): Number of indices (2) should be equal to source.size(dim): (3), for dim: 0"),
    ("index_add_out_of_range", lambda m, x: x.index_add(0, _t(m, [0, 1, 3]), x), RuntimeError,
     "index 3 is out of bounds for dimension 0 with size 3"),
    ("index_add_negative", lambda m, x: x.index_add(0, _t(m, [0, 1, -1]), x), RuntimeError,
     "index -1 is out of bounds for dimension 0 with size 3"),
    ("index_add_int16", lambda m, x: x.index_add(0, _t(m, [0, 1, 2], "int16"), x), RuntimeError,
     "index_add_(): Expected dtype int32/int64 for index but got: Short"),
    ("index_add_matrix", lambda m, x: x.index_add(0, _t(m, [[0]]), x[:1]), IndexError,
     "index_add_(): Index is supposed to be a vector, but got dim: 2 with type: Long and size: [1, 1]"),
    ("index_add_shape", lambda m, x: x.index_add(0, _t(m, [0, 1]), m.ones(2, 5, dtype=m.float64)), RuntimeError,
     "source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = "
     "[3, 4] source.shape = [2, 5]"),
    ("index_add_dtype", lambda m, x: x.index_add(0, _t(m, [0, 1, 2]), x.float()), RuntimeError,
     "index_add_(): self (Double) and source (Float) must have the same scalar type"),
    ("index_copy_negative", lambda m, x: x.index_copy(0, _t(m, [0, 1, -1]), x), IndexError,
     "index_copy_(): index -1 is out of bounds for dimension 0 with size 3"),
    ("index_copy_count", lambda m, x: x.index_copy(0, _t(m, [0, 1]), x), IndexError,
     "index_copy_(): Number of indices (2) should be equal to source.size(dim) (3)"),
    ("index_copy_matrix", lambda m, x: x.index_copy(0, _t(m, [[0, 1, 2]]), x), IndexError,
     "index_copy_(): Index should have dimension 1 or 0 (got 2)"),
    ("index_copy_ndim", lambda m, x: x.index_copy(0, _t(m, [0, 1]), m.ones(2, dtype=m.float64)), IndexError,
     "index_copy_(): When source and destination are not scalars, their dimensionality must match. Source "
     "dimensionality (1), destination dimensionality (2)"),
    ("index_copy_slices", lambda m, x: m.zeros(2, 3, 4).index_copy(1, _t(m, [0]), m.zeros(2, 1, 5)), RuntimeError,
     "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice shape: 2 4 at "
     "dimension 1 and source slice shape: 2 5 at dimension 0."),
    ("index_copy_dtype", lambda m, x: x.index_copy(0, _t(m, [0, 1, 2]), x.float()), RuntimeError,
     "index_copy_(): self and source expected to have the same dtype, but got (self) Double and (source) Float"),
    ("index_copy_int32", lambda m, x: x.index_copy(0, _t(m, [0, 1, 2], "int32"), x), RuntimeError,
     "index_copy_(): Expected a long tensor for index, but got Int"),
    ("index_fill_int32", lambda m, x: x.index_fill(0, _t(m, [0], "int32"), 1.0), IndexError,
     "index_fill_(): Expected dtype int64 for index."),
    ("index_fill_out_of_range", lambda m, x: x.index_fill(0, _t(m, [3]), 1.0), IndexError,
     "index 3 is out of bounds for dimension 0 with size 3"),
    ("index_fill_matrix", lambda m, x: x.index_fill(0, _t(m, [[0]]), 1.0), RuntimeError,
     "Index has to be a vector/scalar"),
    ("index_fill_1d_value", lambda m, x: x.index_fill(0, _t(m, [0]), _t(m, [1.0])), RuntimeError,
     "index_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 dimension(s)."),
    ("masked_scatter_int_mask", lambda m, x: x.masked_scatter(_t(m, [1, 0, 1, 0]), x), RuntimeError,
     "masked_scatter_ only supports boolean masks, but got mask with dtype Long"),
    ("masked_scatter_dtype", lambda m, x: x.masked_scatter(_t(m, [True, False, True, False]), x.float()),
     RuntimeError, "masked_scatter: expected self and source to have same dtypes but gotDouble and Float"),
    ("masked_scatter_short", lambda m, x: x.masked_scatter(_t(m, MASK), _t(m, [1.0, 2.0], "float64")),
     RuntimeError, "Number of elements of source < number of ones in mask"),
    ("scatter_reduce_bad", lambda m, x: x.scatter_reduce(0, _t(m, [[0]]), x, "foo"), RuntimeError,
     "reduce argument must be either sum, prod, mean, amax or amin, got foo"),
    ("scatter_reduce_int16", lambda m, x: x.scatter_reduce(0, _t(m, [[0]], "int16"), x, "sum"), RuntimeError,
     "scatter(): Expected dtype int32/int64 for index"),
    ("scatter_deprecated_reduce", lambda m, x: x.scatter(0, _t(m, [[0]]), x, reduce="mean"), RuntimeError,
     "reduce argument must be either add or multiply."),
]


@pytest.mark.parametrize("m_name", ["tapegrad", "torch"])
@pytest.mark.parametrize("bad", BAD, ids=[b[0] for b in BAD])
def test_errors(bad, m_name):
    m = tg if m_name == "tapegrad" else pytest.importorskip("torch")
    _, call, kind, msg = bad
    with pytest.raises(kind) as e:
        call(m, m.tensor(X, dtype=m.float64))
    assert str(e.value).splitlines()[0] == msg
