"""Sorting, selection and scans (ops/order.py; cumprod and logcumsumexp in
ops/reduce.py): values against literals, NumPy and PyTorch (ties and NaNs as
PyTorch orders them), dtypes, errors, the compiled and interpreted reverse,
create_graph, gradcheck/gradgradcheck, and tg.compile / tg.record replays with
inputs in another order."""
import math

import numpy as np
import pytest

import tapegrad as tg

NAN = float("nan")


def _torch():
    return pytest.importorskip("torch")


def _tt(torch, a):
    return torch.tensor(np.asarray(a))


def _same(a, b):
    """tapegrad tensor ``a`` equals the torch tensor ``b`` in values (NaN = NaN), shape and dtype."""
    an, bn = a.numpy(), b.detach().numpy()
    assert an.shape == bn.shape and an.dtype == bn.dtype
    np.testing.assert_array_equal(an, bn)


def _ties(rng, shape, nan=False):
    a = rng.integers(0, 4, shape).astype(np.float64)
    if nan:
        a.reshape(-1)[rng.integers(0, a.size, max(1, a.size // 6))] = NAN
    return a


# -- values ---------------------------------------------------------------------------
def test_sort_literals_ties_and_nan():
    x = tg.tensor([3.0, 1.0, 3.0, 2.0, 1.0, NAN, 3.0])
    v, i = tg.sort(x)
    assert v.tolist()[:6] == [1.0, 1.0, 2.0, 3.0, 3.0, 3.0] and math.isnan(v.tolist()[6])
    assert i.tolist() == [1, 4, 3, 0, 2, 6, 5] and i.dtype == tg.int64
    r = tg.sort(x, descending=True)
    assert math.isnan(r.values.tolist()[0]) and r.values.tolist()[1:] == [3.0, 3.0, 3.0, 2.0, 1.0, 1.0]
    assert r.indices.tolist() == [5, 0, 2, 6, 3, 1, 4]
    assert tg.argsort(x, descending=True).tolist() == [5, 0, 2, 6, 3, 1, 4]
    assert tg.sort(x, stable=True).indices.tolist() == [1, 4, 3, 0, 2, 6, 5]
    assert x.sort().indices.tolist() == [1, 4, 3, 0, 2, 6, 5] and x.argsort().tolist() == [1, 4, 3, 0, 2, 6, 5]
    m = tg.tensor([[3, 1], [0, 5], [2, 2]])
    assert tg.msort(m).tolist() == [[0, 1], [2, 2], [3, 5]] and m.msort().dtype == tg.int64
    assert tg.sort(m, 0, True).values.tolist() == [[3, 5], [2, 2], [0, 1]]
    assert tg.sort(tg.tensor([True, False, True])).indices.tolist() == [1, 0, 2]
    s = tg.sort(tg.tensor(3.0))
    assert s.values.shape == () and s.indices.tolist() == 0
    assert tg.sort(tg.zeros(0, 2)).values.shape == (0, 2)


def test_named_tuples_unpack():
    x = tg.tensor([[2.0, 7.0, 1.0], [5.0, 3.0, 4.0]])
    for r in (tg.sort(x), tg.topk(x, 2), tg.kthvalue(x, 2), tg.median(x, 1), tg.nanmedian(x, 1),
              tg.cummax(x, 1), tg.cummin(x, 1)):
        values, indices = r
        assert values is r.values and indices is r.indices and r[0] is values and len(r) == 2
        assert indices.dtype == tg.int64 and values.dtype == tg.float64
    assert isinstance(tg.sort(x), type(tg.max(x, 1)))       # (the type max(dim) returns)


def test_selection_literals():
    x = tg.tensor([[2.0, 7.0, 1.0, 8.0], [5.0, 3.0, 4.0, 6.0]])
    t = tg.topk(x, 2)
    assert t.values.tolist() == [[8.0, 7.0], [6.0, 5.0]] and t.indices.tolist() == [[3, 1], [3, 0]]
    assert x.topk(1, dim=0, largest=False).values.tolist() == [[2.0, 3.0, 1.0, 6.0]]
    k = tg.kthvalue(x, 3, 1, keepdim=True)
    assert k.values.tolist() == [[7.0], [5.0]] and k.indices.tolist() == [[1], [0]]
    assert x.kthvalue(1).values.tolist() == [1.0, 3.0]
    assert tg.median(x).tolist() == 4.0           # the lower median of 8 values
    md = x.median(1)
    assert md.values.tolist() == [2.0, 4.0] and md.indices.tolist() == [0, 2]
    assert math.isnan(tg.median(tg.tensor([1.0, NAN, 2.0])).item())
    nm = tg.nanmedian(tg.tensor([NAN, 1.0, NAN, 2.0]), 0)
    assert nm.values.item() == 1.0 and nm.indices.item() == 1
    assert tg.nanmedian(tg.tensor([1.0, NAN, 3.0, 2.0])).item() == 2.0
    assert tg.median(tg.tensor([1, 2, 3, 4])).tolist() == 2
    assert math.isnan(tg.median(tg.tensor([])).item())


def test_cummax_cummin_literals():
    x = tg.tensor([1.0, 3.0, 2.0, 3.0, 1.0, 3.0])
    c = tg.cummax(x, 0)
    assert c.values.tolist() == [1.0, 3.0, 3.0, 3.0, 3.0, 3.0] and c.indices.tolist() == [0, 1, 1, 3, 3, 5]
    c = x.cummin(0)
    assert c.values.tolist() == [1.0] * 6 and c.indices.tolist() == [0, 0, 0, 0, 4, 4]
    n = tg.cummax(tg.tensor([1.0, NAN, 2.0, NAN, 5.0]), 0)
    assert n.indices.tolist() == [0, 1, 1, 3, 3] and np.isnan(n.values.numpy()[1:]).all()
    assert tg.cummax(tg.tensor([[1, 0], [0, 2]]), 1).values.tolist() == [[1, 1], [0, 2]]


def test_quantile_against_numpy():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 7))
    qs = [0.0, 0.1, 0.25, 0.5, 0.77, 1.0]
    for method in ("linear", "lower", "higher", "midpoint", "nearest"):
        got = tg.quantile(tg.tensor(a), tg.tensor(qs), dim=1, interpolation=method)
        np.testing.assert_allclose(got.numpy(), np.quantile(a, qs, axis=1, method=method), rtol=1e-14, atol=1e-15)
        got = tg.tensor(a).quantile(0.3, interpolation=method)
        assert got.shape == () and got.item() == pytest.approx(np.quantile(a, 0.3, method=method), rel=1e-14)
    assert tg.quantile(tg.tensor(a), tg.tensor([0.2, 0.7]), dim=0, keepdim=True).shape == (2, 1, 7)
    assert tg.quantile(tg.tensor(a), tg.tensor([0.2, 0.7]), keepdim=True).shape == (2, 1, 1)
    b = a.copy()
    b[1, 3] = NAN
    got = tg.quantile(tg.tensor(b), 0.4, dim=1).numpy()
    assert np.isnan(got[1]) and not np.isnan(got[[0, 2, 3]]).any()
    np.testing.assert_allclose(tg.nanquantile(tg.tensor(b), 0.4, dim=1).numpy(), np.nanquantile(b, 0.4, axis=1),
                               rtol=1e-14)
    assert tg.tensor(b).nanquantile(0.5).item() == pytest.approx(np.nanquantile(b, 0.5), rel=1e-14)
    assert math.isnan(tg.nanquantile(tg.tensor([NAN, NAN]), 0.5).item())


def test_diff_literals():
    x = tg.tensor([[1.0, 4.0, 9.0, 16.0], [0.0, 1.0, 0.0, 1.0]])
    assert tg.diff(x).tolist() == [[3.0, 5.0, 7.0], [1.0, -1.0, 1.0]]
    assert x.diff(n=2).tolist() == [[2.0, 2.0], [-2.0, 2.0]]
    assert tg.diff(x, dim=0).tolist() == [[-1.0, -3.0, -9.0, -15.0]]
    p = tg.diff(x, prepend=tg.zeros(2, 1), append=tg.ones(2, 1))
    assert p.tolist() == [[1.0, 3.0, 5.0, 7.0, -15.0], [0.0, 1.0, -1.0, 1.0, 0.0]]
    assert tg.diff(x, n=0).tolist() == x.tolist() and tg.diff(x, n=5).shape == (2, 0)
    assert tg.diff(tg.tensor([True, False, False])).tolist() == [True, False]
    assert tg.diff(tg.tensor([1, 5, 2])).tolist() == [4, -3]


def test_searchsorted_and_unique():
    seq = tg.tensor([1.0, 2.0, 2.0, 3.0])
    v = tg.tensor([[2.0, 0.5], [3.5, 2.0]])
    assert tg.searchsorted(seq, v).tolist() == [[1, 0], [4, 1]]
    assert tg.searchsorted(seq, v, right=True).tolist() == [[3, 0], [4, 3]]
    assert tg.searchsorted(seq, v, side="right").tolist() == [[3, 0], [4, 3]]
    assert tg.searchsorted(seq, 2.0).tolist() == 1 and tg.searchsorted(seq, v).dtype == tg.int64
    assert tg.searchsorted(seq, v, out_int32=True).dtype == tg.int32
    assert tg.searchsorted(tg.tensor([3.0, 1.0, 2.0]), tg.tensor([2.5]), sorter=tg.tensor([1, 2, 0])).tolist() == [2]
    rows = tg.tensor([[1.0, 3.0], [2.0, 4.0]])
    assert tg.searchsorted(rows, tg.tensor([[2.0], [2.0]])).tolist() == [[1], [0]]
    u = tg.unique(tg.tensor([3, 1, 3, 2]))
    assert u.tolist() == [1, 2, 3] and u.dtype == tg.int64
    u, inv, cnt = tg.unique(tg.tensor([3, 1, 3, 2]), return_inverse=True, return_counts=True)
    assert inv.tolist() == [2, 0, 2, 1] and cnt.tolist() == [1, 1, 2] and inv.dtype == tg.int64
    u, inv = tg.tensor([[1, 2], [1, 2], [0, 1]]).unique(dim=0, return_inverse=True)
    assert u.tolist() == [[0, 1], [1, 2]] and inv.tolist() == [1, 1, 0]
    x = tg.tensor([2.0, 1.0], requires_grad=True)
    assert not tg.unique(x).requires_grad and not tg.searchsorted(x, x).requires_grad


def test_cumprod_and_logcumsumexp_values():
    x = tg.tensor([[2.0, 0.0, 3.0], [1.5, -2.0, 4.0]])
    assert tg.cumprod(x, 1).tolist() == [[2.0, 0.0, 0.0], [1.5, -3.0, -12.0]]
    assert x.cumprod(0).tolist() == [[2.0, 0.0, 3.0], [3.0, -0.0, 12.0]]
    assert tg.cumprod(tg.tensor([1, 2, 3]), 0).tolist() == [1, 2, 6] and tg.cumprod(tg.tensor([1, 2]), 0).dtype == tg.int64
    assert tg.cumprod(tg.tensor([True, True]), 0).dtype == tg.int64
    assert tg.cumprod(tg.tensor([1, 2]), 0, dtype=tg.float32).dtype == tg.float32
    assert tg.logcumsumexp(tg.tensor([-1000.0, 0.0]), 0).tolist() == [-1000.0, 0.0]
    assert tg.logcumsumexp(tg.tensor([0.0, -1000.0]), 0).tolist() == [0.0, 0.0]
    a = np.random.default_rng(5).standard_normal((3, 4))
    np.testing.assert_allclose(tg.tensor(a).logcumsumexp(1).numpy(), np.log(np.cumsum(np.exp(a), 1)), rtol=1e-14)
    assert tg.logcumsumexp(tg.tensor(2.0), 0).item() == 2.0
    assert tg.logcumsumexp(tg.tensor([1.0, 2.0], dtype=tg.float32), 0).dtype == tg.float32


# -- against PyTorch ------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_orders_against_torch_with_ties(seed):
    torch = _torch()
    rng = np.random.default_rng(seed)
    a = _ties(rng, (3, int(rng.integers(1, 12))), nan=seed % 2 == 1)
    x, t = tg.tensor(a), _tt(torch, a)
    for dim in (0, 1, -1):
        for desc in (False, True):
            r = tg.sort(x, dim, desc)
            for s in (torch.sort(t, dim=dim, descending=desc, stable=True), torch.sort(t, dim, desc)):
                _same(r.values, s.values)
                _same(r.indices, s.indices)
            _same(tg.argsort(x, dim, desc), torch.argsort(t, dim=dim, descending=desc, stable=True))
        for fn in ("median", "nanmedian", "cummax", "cummin"):
            r, s = getattr(tg, fn)(x, dim), getattr(torch, fn)(t, dim)
            _same(r.values, s.values)
            _same(r.indices, s.indices)
        n = a.shape[dim]
        for k in range(1, n + 1):
            r, s = tg.kthvalue(x, k, dim, keepdim=True), torch.kthvalue(t, k, dim, keepdim=True)
            _same(r.values, s.values)
            _same(r.indices, s.indices)
            for largest in (True, False):
                r, s = tg.topk(x, k, dim, largest), torch.topk(t, k, dim, largest)
                _same(r.values, s.values)
                _same(r.indices, s.indices)
    _same(tg.median(x), torch.median(t))
    _same(tg.nanmedian(x), torch.nanmedian(t))
    row, rt = tg.tensor(a[0]), _tt(torch, a[0])        # (one row: 1-d)
    for k in range(1, a.shape[1] + 1):
        _same(tg.kthvalue(row, k).indices, torch.kthvalue(rt, k).indices)
    _same(tg.median(row, 0).indices, torch.median(rt, 0).indices)
    _same(tg.msort(x), torch.msort(t))


@pytest.mark.parametrize("n", [64, 130, 300])
def test_topk_ties_in_long_rows_against_torch(n):
    # (k * 64 <= n: PyTorch's kernel takes a partial sort, else a selection and a sort)
    torch = _torch()
    rng = np.random.default_rng(n)
    a = _ties(rng, (2, n), nan=True)
    for k in (1, 2, 5, n // 2, n):
        for largest in (True, False):
            r, s = tg.topk(tg.tensor(a), k, 1, largest), torch.topk(_tt(torch, a), k, 1, largest)
            _same(r.values, s.values)
            _same(r.indices, s.indices)


def test_topk_indices_without_ties_against_torch():
    torch = _torch()
    a = np.random.default_rng(8).standard_normal((4, 9))
    for k in (1, 4, 9):
        for largest in (True, False):
            r, s = tg.topk(tg.tensor(a), k, 1, largest), torch.topk(_tt(torch, a), k, 1, largest)
            _same(r.values, s.values)
            _same(r.indices, s.indices)


@pytest.mark.parametrize("dtype", ["int64", "int32", "float32", "bool", "uint8"])
def test_dtypes_against_torch(dtype):
    torch = _torch()
    a = np.array([[3, 1, 0, 2], [1, 1, 3, 0]]).astype(dtype)
    x, t = tg.tensor(a), _tt(torch, a)
    for fn, args in (("sort", (1,)), ("sort", (0, True)), ("cummax", (1,)), ("cummin", (0,)), ("msort", ()),
                     ("argsort", (1,)), ("median", ()), ("cumprod", (1,)), ("diff", ())):
        if dtype == "bool" and fn in ("median",):
            continue
        r, s = getattr(tg, fn)(x, *args), getattr(torch, fn)(t, *args)
        for u, v in zip(r if isinstance(r, tuple) else (r,), s if isinstance(s, tuple) else (s,)):
            _same(u, v)
    if dtype != "bool":
        for fn, args in (("topk", (2,)), ("kthvalue", (2,)), ("median", (1,))):
            r, s = getattr(tg, fn)(x, *args), getattr(torch, fn)(t, *args)
            _same(r.values, s.values)
            assert r.indices.dtype == tg.int64


def test_quantile_and_others_against_torch():
    torch = _torch()
    rng = np.random.default_rng(11)
    a = rng.standard_normal((3, 5))
    a[2, 1] = NAN
    x, t = tg.tensor(a), _tt(torch, a)
    for fname in ("quantile", "nanquantile"):
        for method in ("linear", "lower", "higher", "midpoint", "nearest"):
            for q, qt in ((0.35, 0.35), (tg.tensor([0.0, 0.5, 0.9]), torch.tensor([0.0, 0.5, 0.9], dtype=torch.float64))):
                for dim, keep in ((None, False), (1, False), (0, True), (None, True)):
                    r = getattr(tg, fname)(x, q, dim, keep, interpolation=method)
                    s = getattr(torch, fname)(t, qt, dim, keep, interpolation=method)
                    assert r.shape == tuple(s.shape)
                    np.testing.assert_allclose(r.numpy(), s.numpy(), rtol=1e-14, atol=1e-15)
    b = np.abs(a[:2]) + 0.5
    for dim in (0, 1):
        np.testing.assert_allclose(tg.cumprod(tg.tensor(b), dim).numpy(), torch.cumprod(_tt(torch, b), dim).numpy(),
                                   rtol=1e-14)
        np.testing.assert_allclose(tg.logcumsumexp(tg.tensor(b), dim).numpy(),
                                   torch.logcumsumexp(_tt(torch, b), dim).numpy(), rtol=1e-14)
        for n in (1, 2):
            _same(tg.diff(tg.tensor(b), n, dim), torch.diff(_tt(torch, b), n, dim))
    seq, vals = np.array([1.0, 2.0, 2.0, 3.0, 5.0]), np.array([[0.0, 2.0, 2.5], [5.0, 6.0, 3.0]])
    for right in (False, True):
        _same(tg.searchsorted(tg.tensor(seq), tg.tensor(vals), right=right),
              torch.searchsorted(_tt(torch, seq), _tt(torch, vals), right=right))
    for arr in (np.array([4, 1, 4, 0, 1, 4]), np.array([1.0, NAN, 2.0, NAN, 1.0])):
        for r, s in zip(tg.unique(tg.tensor(arr), return_inverse=True, return_counts=True),
                        torch.unique(_tt(torch, arr), return_inverse=True, return_counts=True)):
            _same(r, s)


def _messages(call):
    """(type name, message) of the error ``call(module)`` raises, for tapegrad and torch."""
    torch = _torch()
    got = []
    for m in (tg, torch):
        with pytest.raises(Exception) as e:
            call(m)
        got.append((e.type.__name__, str(e.value)))
    return got


@pytest.mark.parametrize("call", [
    lambda m: m.sort(m.zeros(2, 3), 2),
    lambda m: m.topk(m.zeros(2, 3), 4),
    lambda m: m.topk(m.zeros(2, 3), -1),
    lambda m: m.kthvalue(m.zeros(2, 3), 0),
    lambda m: m.kthvalue(m.zeros(2, 3), 4, 1),
    lambda m: m.kthvalue(m.zeros(2, 3), 3, 0),
    lambda m: m.median(m.zeros(0, 3), 0),
    lambda m: m.nanmedian(m.zeros(2, 0), 1),
    lambda m: m.cummax(m.zeros(2, 3), 2),
    lambda m: m.cummin(m.zeros(2, 3), -3),
    lambda m: m.cumprod(m.zeros(2, 3), 2),
    lambda m: m.logcumsumexp(m.zeros(2, 3), 2),
    lambda m: m.logcumsumexp(m.tensor([1, 2]), 0),
    lambda m: m.quantile(m.zeros(2, 3), 1.5),
    lambda m: m.quantile(m.zeros(2, 3), -0.5),
    lambda m: m.quantile(m.zeros(2, 3).long(), 0.5),
    lambda m: m.quantile(m.zeros(2, 3), m.zeros(1, 1)),
    lambda m: m.quantile(m.zeros(2, 3), 0.5, interpolation="cubic"),
    lambda m: m.quantile(m.zeros(0), 0.5),
    lambda m: m.quantile(m.zeros(2, 3), 0.5, dim=2),
    lambda m: m.diff(m.tensor(1.0)),
    lambda m: m.diff(m.zeros(3), n=-1),
    lambda m: m.diff(m.zeros(2, 3), prepend=m.zeros(3)),
    lambda m: m.diff(m.zeros(3), prepend=1.0),
    lambda m: m.searchsorted(m.zeros(3), m.zeros(2), right=True, side="left"),
    lambda m: m.searchsorted(m.zeros(3), m.zeros(2), side="up"),
    lambda m: m.searchsorted(m.zeros(1, 3), m.zeros(2)),
    lambda m: m.searchsorted(m.zeros(3), m.zeros(2), sorter=m.tensor([0, 1])),
    lambda m: m.searchsorted(m.zeros(3), m.zeros(2), sorter=m.tensor([0.0, 1.0, 2.0], dtype=m.float32)),
    lambda m: m.searchsorted(m.tensor(1.0), m.zeros(2)),
    lambda m: m.searchsorted(m.zeros(2, 3), 1.0),
    lambda m: m.quantile(m.zeros(3), m.tensor([1, 0])),
    lambda m: m.quantile(m.zeros(3, dtype=m.float64), m.tensor([0.5, 1.5], dtype=m.float64)),
    lambda m: m.quantile(m.zeros(3), [0.5]),
    lambda m: m.nanquantile(m.zeros(2).long(), 0.5),
    lambda m: m.topk(m.zeros(3), 1.5),
    lambda m: m.topk(m.tensor([True, False]), 1),
    lambda m: m.kthvalue(m.tensor([True, False]), 1),
    lambda m: m.median(m.tensor([True, False])),
    lambda m: m.nanmedian(m.tensor([True, False]), 0),
    lambda m: m.unique(m.zeros(2, 3), dim=2),
    lambda m: m.cumprod(m.zeros(3)),
    lambda m: m.msort(m.zeros(3), 0),
    lambda m: m.kthvalue(m.zeros(0, 2), 1, 0),
], ids=lambda f: "")
def test_errors_match_torch(call):
    (t1, m1), (t2, m2) = _messages(call)
    assert t1 == t2
    # (PyTorch's argument parser lists the overloads after its first line)
    assert m1 == (m2.split("\n")[0] if m1.endswith("expected one of:") else m2)


def test_out_is_written():
    """out= as PyTorch's: a function of two results takes a tuple of two tensors."""
    x = tg.tensor([3.0, 1.0, 2.0])
    for f in (lambda: tg.sort(x, out=x), lambda: tg.topk(x, 1, out=x)):
        with pytest.raises(TypeError, match="argument 'out' must be tuple of 2 Tensors, not Tensor"):
            f()
    vals, idx = tg.zeros(3), tg.zeros(3, dtype=tg.int64)
    got = tg.sort(x, out=(vals, idx))
    assert got[0] is vals and got[1] is idx and vals.tolist() == [1.0, 2.0, 3.0] and idx.tolist() == [1, 2, 0]
    out = tg.zeros(3)
    assert tg.cumprod(x, 0, out=out) is out and out.tolist() == [3.0, 3.0, 6.0]
    np.testing.assert_allclose(tg.logcumsumexp(x, 0, out=out).numpy(), np.logaddexp.accumulate([3.0, 1.0, 2.0]))


# -- gradients ------------------------------------------------------------------------
# op name -> a function of a float64 tensor giving one differentiable result
_OPS = {
    "sort": lambda m, x: m.sort(x, 1, True)[0],
    "sort0": lambda m, x: m.sort(x, 0)[0],
    "msort": lambda m, x: m.msort(x),
    "topk": lambda m, x: m.topk(x, 2, 1)[0],
    "topk_small": lambda m, x: m.topk(x, 3, 0, largest=False)[0],
    "kthvalue": lambda m, x: m.kthvalue(x, 2, 1)[0],
    "median": lambda m, x: m.median(x),
    "median_dim": lambda m, x: m.median(x, 0, keepdim=True)[0],
    "nanmedian_dim": lambda m, x: m.nanmedian(x, 1)[0],
    "cummax": lambda m, x: m.cummax(x, 1)[0],
    "cummin": lambda m, x: m.cummin(x, 0)[0],
    "quantile": lambda m, x: m.quantile(x, 0.3, dim=1),
    "quantile_q": lambda m, x: m.quantile(x, _q(m), interpolation="midpoint"),
    "nanquantile": lambda m, x: m.nanquantile(x, _q(m), dim=0, keepdim=True),
    "quantile_nearest": lambda m, x: m.quantile(x, 0.6, dim=0, interpolation="nearest"),
    "diff": lambda m, x: m.diff(x, 2, 1),
    "diff_pa": lambda m, x: m.diff(x, 1, 0, prepend=x[:1] * 2.0, append=x[-1:] ** 2),
    "cumprod": lambda m, x: m.cumprod(x, 1),
    "cumprod0": lambda m, x: m.cumprod(x, 0),
    "logcumsumexp": lambda m, x: m.logcumsumexp(x, 1),
    "logcumsumexp0": lambda m, x: m.logcumsumexp(x, 0),
}


def _q(m):
    return m.tensor([0.25, 0.8], dtype=m.float64)


A = np.array([[0.3, -1.2, 2.5, 0.9, -0.4], [1.7, 0.2, -2.1, 1.1, 0.6], [-0.8, 2.2, 0.5, -1.5, 1.4],
              [0.1, -0.6, 1.9, 2.8, -2.4]])
ZEROS = np.array([[2.0, 0.0, 3.0, 0.5, -1.5], [0.0, 1.5, -2.0, 0.0, 0.7], [1.2, 0.8, 0.0, 0.0, 0.0],
                  [0.0, 0.0, 1.3, 2.0, 0.9]])


def _weights(shape):
    return np.sin(np.arange(1.0, 1.0 + math.prod(shape))).reshape(shape)


@pytest.mark.parametrize("name", sorted(_OPS))
def test_gradient_against_torch(name, reverse):
    torch = _torch()
    for a in (A, ZEROS) if name.startswith("cumprod") else (A,):
        x = tg.tensor(a, requires_grad=True)
        y = _OPS[name](tg, x)
        w = _weights(y.shape)
        (y * tg.tensor(w)).sum().backward()
        t = torch.tensor(a, requires_grad=True)
        z = _OPS[name](torch, t)
        (z * torch.tensor(w)).sum().backward()
        assert y.shape == tuple(z.shape)
        np.testing.assert_allclose(y.detach().numpy(), z.detach().numpy(), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", sorted(_OPS))
def test_gradcheck_and_gradgradcheck(name):
    f = _OPS[name]
    for a in (A, ZEROS) if name.startswith("cumprod") else (A,):
        x = tg.tensor(a, requires_grad=True)
        assert tg.autograd.gradcheck(lambda t: f(tg, t), (x,))
        # (most of these are linear in x: a product shows their second derivative)
        assert tg.autograd.gradgradcheck(lambda t: f(tg, t) * f(tg, t), (x,))
        if name.startswith(("cumprod", "logcumsumexp")):
            assert tg.autograd.gradgradcheck(lambda t: f(tg, t), (x,))


@pytest.mark.parametrize("row", [[2.0, 0.0, 3.0, 4.0], [0.0, 2.0, 3.0, 0.5], [1.5, -2.0, 0.0, 0.0],
                                 [1.0, 0.0, 2.0, 0.0, 3.0], [0.0, 0.0, 0.0]])
def test_cumprod_with_zeros_second_derivative_against_torch(row):
    torch = _torch()
    w = np.arange(1.0, len(row) + 1.0)
    x = tg.tensor(row, requires_grad=True)
    (g,) = tg.autograd.grad((tg.cumprod(x, 0) * tg.tensor(w)).sum(), x, create_graph=True)
    (h,) = tg.autograd.grad((g * tg.tensor(w[::-1].copy())).sum(), x)
    t = torch.tensor(row, requires_grad=True, dtype=torch.float64)
    (gt,) = torch.autograd.grad((torch.cumprod(t, 0) * torch.tensor(w)).sum(), t, create_graph=True)
    (ht,) = torch.autograd.grad((gt * torch.tensor(w[::-1].copy())).sum(), t)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-13)
    np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-13)


@pytest.mark.parametrize("row", [[-1000.0, 0.0], [0.0, -1000.0], [-1000.0, -1000.0, 5.0]])
def test_logcumsumexp_is_stable(row, reverse):
    x = tg.tensor(row, requires_grad=True)
    y = tg.logcumsumexp(x, 0)
    w = [1.0, -2.0, 3.0][:len(row)]
    (y * tg.tensor(w)).sum().backward()
    assert np.isfinite(y.detach().numpy()).all() and np.isfinite(x.grad.numpy()).all()
    want = {(-1000.0, 0.0): ([-1000.0, 0.0], [1.0, -2.0]), (0.0, -1000.0): ([0.0, 0.0], [-1.0, 0.0]),
            (-1000.0, -1000.0, 5.0): ([-1000.0, -1000.0 + math.log(2.0), 5.0], [0.0, -1.0, 3.0])}[tuple(row)]
    np.testing.assert_allclose(y.detach().numpy(), want[0], rtol=1e-15)
    np.testing.assert_allclose(x.grad.numpy(), want[1], rtol=1e-13, atol=1e-13)
    torch = pytest.importorskip("torch")
    t = torch.tensor(row, requires_grad=True, dtype=torch.float64)
    (torch.logcumsumexp(t, 0) * torch.tensor(w, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("fn", ["median", "nanmedian"])
def test_median_of_everything_spreads_its_gradient_over_ties(fn):
    """median() and nanmedian() without a dim: PyTorch's gradient is spread evenly over the
    elements equal to the median (over the NaNs when it is NaN), as max()'s, not sent to
    one of them (median along a dim sends it to the one its index names); forward mode the
    same; a replay with other ties spreads over those.  Against PyTorch where installed."""
    cases = [([1.0, 1.0, 1.0, 0.0], [1 / 3, 1 / 3, 1 / 3, 0.0]), ([3.0, 1.0, 2.0, 2.0], [0.0, 0.0, 0.5, 0.5]),
             ([[2.0, 2.0, 5.0], [1.0, 2.0, 7.0]], [[1 / 3, 1 / 3, 0.0], [0.0, 1 / 3, 0.0]]),
             ([4.0, 1.0, 9.0], [1.0, 0.0, 0.0]), ([NAN, NAN], [0.5, 0.5])]
    cases.append(([1.0, NAN, 2.0, NAN], [1.0, 0.0, 0.0, 0.0] if fn == "nanmedian" else [0.0, 0.5, 0.0, 0.5]))
    try:
        import torch
    except ImportError:
        torch = None
    for v, want in cases:
        x = tg.tensor(v, requires_grad=True)
        y = getattr(x, fn)()
        assert y.grad_fn.name() == ("NanmedianBackward0" if fn == "nanmedian" else "MedianBackward0")
        y.backward()
        np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-15)
        d = np.arange(1.0, 1.0 + np.size(v)).reshape(np.shape(v))
        _, jv = tg.autograd.functional.jvp(lambda a: getattr(a, fn)(), tg.tensor(v), tg.tensor(d))
        np.testing.assert_allclose(jv.item(), (np.array(want) * d).sum(), rtol=1e-15)
        if torch is not None:
            t = torch.tensor(v, dtype=torch.float64, requires_grad=True)
            getattr(t, fn)().backward()
            np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-15)
    compiled = tg.compile(lambda a: getattr(a, fn)() * a)
    for v in ([1.0, 2.0, 3.0], [5.0, 1.0, 2.0], [2.0, 2.0, 9.0], [7.0, 0.0, 7.0]):
        x, x2 = tg.tensor(v, requires_grad=True), tg.tensor(v, requires_grad=True)
        compiled(x).sum().backward()
        (getattr(x2, fn)() * x2).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-15)
    assert compiled.stats.replays == 3 and compiled.stats.divergences == 0


def test_repeated_picks_accumulate():
    # the median of a row of equal values and a quantile between two equal order statistics
    x = tg.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    (tg.quantile(x, tg.tensor([0.5, 0.5, 0.75]), dim=1).sum()).backward()
    assert x.grad.tolist() == [[0.0, 2.5, 0.5]]
    y = tg.tensor([4.0, 1.0], requires_grad=True)
    (tg.cummax(y, 0).values.sum()).backward()
    assert y.grad.tolist() == [2.0, 0.0]


def test_grad_fn_names():
    x = tg.tensor([[2.0, 1.0], [0.5, 3.0]], requires_grad=True)
    assert tg.sort(x).values.grad_fn.name() == "SortBackward0"
    assert tg.topk(x, 1).values.grad_fn.name() == "TopkBackward0"
    assert tg.kthvalue(x, 1).values.grad_fn.name() == "KthvalueBackward0"
    assert tg.median(x).grad_fn.name() == "MedianBackward0"
    assert tg.median(x, 0).values.grad_fn.name() == "MedianBackward1"
    assert tg.cummax(x, 0).values.grad_fn.name() == "CummaxBackward0"
    assert tg.cumprod(x, 0).grad_fn.name() == "CumprodBackward0"
    assert tg.logcumsumexp(x, 0).grad_fn.name() == "LogcumsumexpBackward0"


# -- replay -----------------------------------------------------------------------------
def _body(x):
    s = tg.sort(x, 1).values * tg.arange(5.0)
    t = tg.topk(x, 2, 0).values ** 2
    m = tg.median(x, 1).values * 3.0
    c = tg.cummax(x, 1).values * tg.cummin(x, 0).values
    k = tg.kthvalue(x, 2, 1).values
    q = tg.quantile(x, tg.tensor([0.3, 0.8]), dim=1) ** 2
    d = tg.diff(x, 1, 0) ** 2
    p = tg.cumprod(x, 1) * tg.logcumsumexp(x, 0)
    return s.sum() + t.sum() + m.sum() + c.sum() + 5.0 * k.sum() + q.sum() + d.sum() + p.sum() + 7.0 * tg.median(x)


def _eager(xv):
    x = tg.tensor(xv, requires_grad=True)
    out = _body(x)
    out.backward()
    return out.item(), x.grad.numpy()


def test_compile_picks_again_for_inputs_in_another_order():
    cf = tg.compile(_body)
    rng = np.random.default_rng(21)
    for i in range(4):
        xv = rng.standard_normal((4, 5))
        x = tg.tensor(xv, requires_grad=True)
        out = cf(x)
        out.backward()
        value, grad = _eager(xv)
        assert out.item() == pytest.approx(value, rel=1e-13)
        np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-12, atol=1e-13)
    assert cf.stats.recordings == 1 and cf.stats.replays == 3


def test_compile_sorted_values_follow_the_new_order():
    cf = tg.compile(lambda x: (tg.sort(x, 0, True).values * tg.tensor([1.0, 10.0, 100.0])).sum())
    for xv, grad in (([3.0, 1.0, 2.0], [1.0, 100.0, 10.0]), ([1.0, 2.0, 3.0], [100.0, 10.0, 1.0]),
                     ([2.0, 3.0, 1.0], [10.0, 1.0, 100.0])):
        x = tg.tensor(xv, requires_grad=True)
        out = cf(x)
        out.backward()
        assert out.item() == sum(v * w for v, w in zip(sorted(xv, reverse=True), [1.0, 10.0, 100.0]))
        assert x.grad.tolist() == grad
    assert cf.stats.replays == 2


def test_record_replays_and_tape_files(tmp_path):
    rng = np.random.default_rng(22)
    tape = tg.record(_body, rng.standard_normal((4, 5)))
    for _ in range(2):
        xv = rng.standard_normal((4, 5))
        v, g = tape.value_and_grad(xv)
        value, grad = _eager(xv)
        assert v == pytest.approx(value, rel=1e-13)
        np.testing.assert_allclose(g, grad, rtol=1e-12, atol=1e-13)
    path = tmp_path / "order.tape"
    tape.save(str(path))
    loaded = tg.load_tape(str(path))
    xv = rng.standard_normal((4, 5))
    assert float(loaded(xv)) == pytest.approx(_eager(xv)[0], rel=1e-13)


def test_compile_nanquantile_guards_the_nan_pattern():
    cf = tg.compile(lambda x: tg.nanquantile(x, 0.5, dim=0).sum())
    for xv in ([1.0, NAN, 3.0, 2.0], [4.0, NAN, 0.0, 1.0], [NAN, NAN, 5.0, 1.0]):
        x = tg.tensor(xv, requires_grad=True)
        out = cf(x)
        out.backward()
        assert out.item() == np.nanquantile(xv, 0.5)
        e = tg.tensor(xv, requires_grad=True)
        tg.nanquantile(e, 0.5, dim=0).sum().backward()
        assert x.grad.tolist() == e.grad.tolist()
    assert cf.stats.recordings == 2         # (a new NaN pattern records again)


def test_indices_outputs_replay():
    def body(x):
        s, i = tg.sort(x, 0, True)
        return s * 2.0, i, tg.topk(x, 2).indices, tg.cummax(x, 0).indices, tg.kthvalue(x, 2).indices, \
            tg.median(x, 0).indices
    cf = tg.compile(body)
    for xv in ([3.0, 1.0, 2.0, 2.0], [1.0, 3.0, 2.0, 0.0], [0.0, 0.0, 5.0, -1.0]):
        got = cf(tg.tensor(xv, requires_grad=True))
        want = body(tg.tensor(xv, requires_grad=True))
        assert got[0].tolist() == want[0].tolist()
        for g, w in zip(got[1:], want[1:]):
            assert g.dtype == tg.int64 and g.tolist() == w.tolist()
    assert cf.stats.recordings == 1 and cf.stats.replays == 2
    tape = tg.record(lambda x: tg.sort(x, 0)[1], np.array([2.0, 1.0, 3.0]))
    np.testing.assert_array_equal(tape(np.array([3.0, 2.0, 1.0])), [2, 1, 0])


def test_logcumsumexp_leading_minus_inf(reverse):
    torch = _torch()
    row, w = [-math.inf, -math.inf, 1.0, 0.5], [1.0, -2.0, 3.0, -1.5]
    x = tg.tensor(row, requires_grad=True)
    (g,) = tg.autograd.grad((tg.logcumsumexp(x, 0) * tg.tensor(w)).sum(), x, create_graph=True)
    (h,) = tg.autograd.grad((g * g).sum(), x)
    t = torch.tensor(row, requires_grad=True, dtype=torch.float64)
    (gt,) = torch.autograd.grad((torch.logcumsumexp(t, 0) * torch.tensor(w, dtype=torch.float64)).sum(), t,
                                create_graph=True)
    (ht,) = torch.autograd.grad((gt * gt).sum(), t)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-13, atol=1e-15)
    assert np.isnan(g.detach().numpy()[:2]).all()       # (PyTorch's exp(-inf - -inf))
    x = tg.tensor([1.0, -math.inf, 2.0], requires_grad=True)
    (tg.logcumsumexp(x, 0) * tg.tensor([1.0, -2.0, 3.0])).sum().backward()
    assert x.grad.tolist()[1] == 0.0 and np.isfinite(x.grad.numpy()).all()
    np.testing.assert_allclose(h.numpy()[2:], ht.numpy()[2:], rtol=1e-12, atol=1e-14)
    assert np.isfinite(h.numpy()[2:]).all()


def test_cumprod_in_place():
    torch = _torch()
    a = tg.tensor([1.0, 2.0, 0.0, 3.0], requires_grad=True)
    b = a * 2.0
    assert b.cumprod_(0) is b and b.grad_fn.name() == "CumprodBackward0"
    (b * tg.tensor([1.0, -1.0, 2.0, 0.5])).sum().backward()
    t = torch.tensor([1.0, 2.0, 0.0, 3.0], requires_grad=True, dtype=torch.float64)
    u = t * 2.0
    u.cumprod_(0)
    (u * torch.tensor([1.0, -1.0, 2.0, 0.5], dtype=torch.float64)).sum().backward()
    assert b.tolist() == u.tolist() and a.grad.tolist() == t.grad.tolist()


def test_recorded_indices_in_a_tape_file(tmp_path):
    tape = tg.record(lambda x: tg.topk(x, 2, 0).indices, np.array([2.0, 1.0, 3.0]))
    path = tmp_path / "topk.tape"
    tape.save(str(path))
    loaded = tg.load_tape(str(path))
    np.testing.assert_array_equal(loaded(np.array([0.5, 4.0, 1.0])), [1, 2])


def test_compiled_forward_of_arrays_picks_again():
    from tapegrad import _jit
    _jit.load()         # (the compiled replay of arrays runs once the kernels are loaded)
    cf = tg.compile(_body)
    rng = np.random.default_rng(23)
    for _ in range(4):
        xv = rng.standard_normal((4, 5))
        x = tg.tensor(xv, requires_grad=True)
        out = cf(x)
        out.backward()
        value, grad = _eager(xv)
        assert out.item() == pytest.approx(value, rel=1e-13)
        np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-12, atol=1e-13)
    (entry,) = [v for v in cf.cache.values() if isinstance(v, list)]
    assert entry[0].arena is True and entry[0].live       # (the gathers' indices come from each replay's x)
