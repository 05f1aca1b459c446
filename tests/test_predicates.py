"""Predicates (isclose allclose equal isnan isinf isfinite isposinf isneginf),
nonzero and where(condition), axis= as dim=, softmax(dtype=) / log_softmax(dtype=):
values, dtypes and errors as PyTorch's, and their replay."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.nn import functional as F

NAN, INF = float("nan"), float("inf")
SPECIAL = [1.0, -2.5, NAN, INF, -INF, 0.0]


def test_elementwise_predicates_values():
    x = tg.tensor(SPECIAL)
    assert tg.isnan(x).tolist() == [False, False, True, False, False, False]
    assert tg.isinf(x).tolist() == [False, False, False, True, True, False]
    assert tg.isfinite(x).tolist() == [True, True, False, False, False, True]
    assert tg.isposinf(x).tolist() == [False, False, False, True, False, False]
    assert tg.isneginf(x).tolist() == [False, False, False, False, True, False]
    for name in ("isnan", "isinf", "isfinite", "isposinf", "isneginf"):
        assert getattr(x, name)().tolist() == getattr(tg, name)(x).tolist()
        assert getattr(tg, name)(x).dtype == np.bool_
    i = tg.tensor([1, 2])
    assert tg.isnan(i).tolist() == [False, False] and tg.isfinite(i).tolist() == [True, True]
    assert tg.isposinf(tg.tensor([True])).tolist() == [False]


DTYPES = ["float64", "float32", "float16", "int64", "int32", "uint8", "bool"]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite", "isposinf", "isneginf"])
def test_elementwise_predicates_as_pytorch(name, dt):
    torch = pytest.importorskip("torch")
    a = np.array(SPECIAL) if dt.startswith("float") else np.array([0, 1, 3, 1])
    t = getattr(torch, name)(torch.tensor(a.astype(dt)))
    m = getattr(tg, name)(tg.tensor(a.astype(dt)))
    assert str(m.dtype) == "bool" and str(t.dtype) == "torch.bool"
    assert m.tolist() == t.tolist()
    assert getattr(tg.tensor(2.0), name)().ndim == 0
    with pytest.raises(TypeError) as te:
        getattr(torch, name)(1.0)
    with pytest.raises(TypeError) as me:
        getattr(tg, name)(1.0)
    assert str(me.value) == str(te.value)


CLOSE = [
    ([1.0, 2.0, NAN, INF], [1.0, 2.0 + 1e-6, NAN, INF], {}),
    ([1.0, 2.0, NAN, INF], [1.0, 2.0 + 1e-6, NAN, INF], {"equal_nan": True}),
    ([1.0, 2.0, 3.0], [1.1, 2.5, -3.0], {"rtol": 0.1}),
    ([1.0, 2.0, 3.0], [1.1, 2.5, -3.0], {"atol": 0.2, "rtol": 0.0}),
    ([[1.0], [2.0]], [1.0, 2.0, 3.0], {}),                      # broadcast
    ([1, 2, 10], [1, 3, 11], {}),
    ([1, 2, 10], [1, 3, 11], {"atol": 1.5}),
    ([10, 2], [11, 3], {"rtol": 0.1}),
    ([True, False], [True, True], {}),
    ([INF, -INF, INF], [INF, INF, 1.0], {}),
]


@pytest.mark.parametrize("a, b, kw, dt", [c + (None,) for c in CLOSE] + [
    c + ("float32",) for c in CLOSE if isinstance(np.asarray(c[0]).flat[0], float)])
def test_isclose_allclose_as_pytorch(a, b, kw, dt):
    torch = pytest.importorskip("torch")
    ta, tb = torch.tensor(a), torch.tensor(b)
    ma, mb = tg.tensor(a), tg.tensor(b)
    if isinstance(np.asarray(a).flat[0], float):
        ta, tb = ta.double(), tb.double()
        if dt:
            ta, tb, ma, mb = ta.float(), tb.float(), ma.float(), mb.float()
    t = torch.isclose(ta, tb, **kw)
    m = tg.isclose(ma, mb, **kw)
    assert m.dtype == np.bool_ and m.tolist() == t.tolist()
    assert ma.isclose(mb, **kw).tolist() == t.tolist()
    assert tg.allclose(ma, mb, **kw) is torch.allclose(ta, tb, **kw)
    assert ma.allclose(mb, **kw) is ta.allclose(tb, **kw)


def test_isclose_values():
    a = tg.tensor([1.0, 1.0 + 1e-9, 2.0])
    assert tg.isclose(a, tg.tensor([1.0, 1.0, 2.1])).tolist() == [True, True, False]
    assert tg.allclose(a, tg.tensor([1.0, 1.0, 2.0]))
    assert not tg.allclose(a, tg.tensor([1.0, 1.0, 2.1]))
    assert tg.allclose(tg.tensor([2.0]), tg.tensor([2.0, 2.0]))        # broadcast


CLOSE_ERRORS = [
    lambda m: m.isclose(m.tensor([1.0], dtype=m.float64), m.tensor([1.0], dtype=m.float32)),
    lambda m: m.isclose(m.tensor([1, 2]), m.tensor([1.0, 3.0], dtype=m.float32)),
    lambda m: m.isclose(m.tensor([1, 2], dtype=m.int32), m.tensor([1, 3])),
    lambda m: m.isclose(m.tensor([1.0]), 1.0),
    lambda m: m.isclose(m.tensor([1.0]), m.tensor([1.0]), rtol=-1),
    lambda m: m.isclose(m.tensor([1.0]), m.tensor([1.0]), atol=-1),
    lambda m: m.isclose(m.tensor([1.0, 2.0]), m.tensor([1.0, 2.0, 3.0])),
    lambda m: m.allclose(m.tensor([1.0], dtype=m.float64), m.tensor([1.0], dtype=m.float32)),
    lambda m: m.allclose(m.tensor([1.0]), 1.0),
    lambda m: m.equal(m.tensor([1.0]), 1.0),
]


@pytest.mark.parametrize("i", range(len(CLOSE_ERRORS)))
def test_close_errors_as_pytorch(i):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as te:
        CLOSE_ERRORS[i](torch)
    with pytest.raises(Exception) as me:
        CLOSE_ERRORS[i](tg)
    assert type(me.value) is type(te.value)
    assert str(me.value) == str(te.value)


def test_equal():
    assert tg.equal(tg.tensor([1.0, 2.0]), tg.tensor([1.0, 2.0])) is True
    assert tg.equal(tg.tensor([1.0]), tg.tensor([1.0, 1.0])) is False      # (no broadcasting)
    assert tg.equal(tg.tensor([1.0]), tg.tensor([1])) is True              # (promoted)
    assert tg.equal(tg.tensor([NAN]), tg.tensor([NAN])) is False
    assert tg.tensor([1.0, 2.0]).equal(tg.tensor([1.0, 2.5])) is False


def test_equal_as_pytorch():
    torch = pytest.importorskip("torch")
    for a, b in [([1.0], [1.0, 1.0]), ([1.0], [1]), ([1.5], [1]), ([NAN], [NAN]), ([[1, 2]], [[1, 2]]),
                 ([True], [1]), ([], [])]:
        assert tg.equal(tg.tensor(a), tg.tensor(b)) is torch.equal(torch.tensor(a), torch.tensor(b))


# -- nonzero, where(condition) --------------------------------------------------------------------
NONZERO = [[[1, 0], [2, 3]], [0.0, 1.5, 0.0, -2.0], 5, 0, [[True, False, True]], np.zeros((2, 0)), [[[0, 1]]]]


@pytest.mark.parametrize("i", range(len(NONZERO)))
def test_nonzero_and_where_as_pytorch(i):
    torch = pytest.importorskip("torch")
    a = np.asarray(NONZERO[i])
    t, m = torch.tensor(a), tg.tensor(a)
    tn, mn = torch.nonzero(t), tg.nonzero(m)
    assert mn.dtype == np.int64 and list(mn.shape) == list(tn.shape) and mn.tolist() == tn.tolist()
    assert m.nonzero().tolist() == tn.tolist()
    for tt, mt in [(torch.nonzero(t, as_tuple=True), tg.nonzero(m, as_tuple=True)),
                   (torch.where(t), tg.where(m)), (t.nonzero(as_tuple=True), m.nonzero(as_tuple=True))]:
        assert isinstance(mt, tuple) and len(mt) == len(tt)
        for u, v in zip(tt, mt):
            assert v.dtype == np.int64 and list(v.shape) == list(u.shape) and v.tolist() == u.tolist()


def test_where_one_argument_indexes():
    x = tg.tensor([[0.5, -1.0], [2.0, -3.0]], requires_grad=True)
    rows, cols = tg.where(x > 0)
    assert rows.tolist() == [0, 1] and cols.tolist() == [0, 0]
    y = x[tg.where(x > 0)]
    y.sum().backward()
    assert x.grad.tolist() == [[1.0, 0.0], [1.0, 0.0]]


def test_where_errors_as_pytorch():
    torch = pytest.importorskip("torch")
    for call in (lambda m: m.where(m.tensor([True]), m.tensor([1.0])),
                 lambda m: m.where(m.tensor([True]), other=m.tensor([1.0])),
                 lambda m: m.where(m.tensor([1.0], dtype=m.float32), m.tensor([1.0]), m.tensor([2.0]))):
        with pytest.raises(Exception) as te:
            call(torch)
        with pytest.raises(Exception) as me:
            call(tg)
        assert type(me.value) is type(te.value)
        assert str(me.value).split("\n")[0] == str(te.value).split("\n")[0]
    assert tg.where(tg.tensor([True, False]), tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0])).tolist() == [1.0, 4.0]


# -- replay: the predicates are recomputed from the replay's inputs -------------------------------------
def test_predicates_replay_with_new_inputs():
    def f(x):
        y = tg.where(tg.isfinite(x), x, tg.zeros_like(x))
        out = y.sum()
        for c, pred in ((1.0, tg.isnan), (10.0, tg.isposinf), (100.0, tg.isneginf), (1000.0, tg.isinf)):
            out = out + tg.where(pred(x), y + c, y).sum()
        return out
    rec = tg.record(f, np.array([1.0, NAN, 2.0, INF]))
    for a in ([1.0, NAN, 2.0, INF], [3.0, 4.0, -INF, NAN], [NAN, NAN, 5.0, 1.0]):
        arr = np.array(a)
        expected = f(tg.tensor(arr)).item()
        assert rec(arr).item() == expected
    cf = tg.compile(f)
    for a in ([1.0, NAN, 2.0, INF], [3.0, 4.0, -INF, NAN], [NAN, NAN, 5.0, 1.0]):
        assert cf(tg.tensor(a)).item() == f(tg.tensor(a)).item()
    assert cf.stats.replays >= 1


# -- axis= for dim=, keepdims= for keepdim= ---------------------------------------------------------------
AXIS = [("sum", {}), ("mean", {}), ("prod", {}), ("std", {}), ("var", {}), ("amax", {}), ("amin", {}),
        ("logsumexp", {}), ("argmax", {}), ("argmin", {}), ("all", {}), ("any", {}), ("max", {}), ("min", {}),
        ("softmax", None), ("log_softmax", None), ("cumsum", None), ("squeeze", None), ("unsqueeze", None),
        ("unbind", None)]


@pytest.mark.parametrize("name, keep", AXIS)
def test_axis_as_pytorch(name, keep):
    torch = pytest.importorskip("torch")
    a = np.array([[1.0, 3.0, 2.0], [0.5, -1.0, 4.0]]).reshape(2, 1, 3) if name == "squeeze" else \
        np.array([[1.0, 3.0, 2.0], [0.5, -1.0, 4.0]])
    if name in ("all", "any"):
        a = a > 1.0
    ax = 1
    for kws in ([{"axis": ax}] + ([{"axis": ax, "keepdims": True}] if keep is not None else [])):
        t = getattr(torch, name)(torch.tensor(a), **kws)
        m = getattr(tg, name)(tg.tensor(a), **kws)
        tm = getattr(torch.tensor(a), name)(**kws)
        mm = getattr(tg.tensor(a), name)(**kws)
        for u, v in ((t, m), (tm, mm)):
            if isinstance(u, tuple):            # (values, indices) or unbind
                for uu, vv in zip(u, v):
                    np.testing.assert_allclose(vv.numpy(), uu.numpy(), rtol=1e-12)
            else:
                assert list(v.shape) == list(u.shape)
                np.testing.assert_allclose(v.numpy(), u.numpy(), rtol=1e-12)
    if name == "unbind":
        return      # (tapegrad cannot tell unbind(x, 0, axis=1) from unbind(x, axis=1): 0 is dim's default)
    with pytest.raises(TypeError):
        getattr(torch, name)(torch.tensor(a), 0, axis=1)
    with pytest.raises(TypeError):         # (both dim and axis)
        getattr(tg, name)(tg.tensor(a), 0, axis=1)


@pytest.mark.parametrize("name", ["cat", "concat", "stack"])
def test_axis_on_joins(name):
    torch = pytest.importorskip("torch")
    a, b = np.arange(6.0).reshape(2, 3), -np.arange(6.0).reshape(2, 3)
    t = getattr(torch, name)([torch.tensor(a), torch.tensor(b)], axis=1)
    m = getattr(tg, name)([tg.tensor(a), tg.tensor(b)], axis=1)
    np.testing.assert_array_equal(m.numpy(), t.numpy())


def test_axis_gradient():
    x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    tg.sum(x * x, axis=1).sum().backward()
    assert x.grad.tolist() == [[2.0, 4.0], [6.0, 8.0]]
    assert tg.autograd.gradcheck(lambda v: tg.softmax(v, axis=0), (tg.tensor([[0.1, 0.2], [0.3, -0.4]],
                                                                              requires_grad=True),))


# -- softmax(dtype=), log_softmax(dtype=) -----------------------------------------------------------------
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("where", ["torch", "method", "F"])
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("src", ["float32", "float64"])
def test_softmax_dtype_as_pytorch(name, where, dt, src):
    torch = pytest.importorskip("torch")
    a = np.array([[0.1, 1.2, -0.7], [2.0, 0.0, 0.5]], dtype=src)

    def call(mod, fmod, x, d):
        if where == "torch":
            return getattr(mod, name)(x, 1, dtype=d)
        if where == "method":
            return getattr(x, name)(1, dtype=d)
        return getattr(fmod, name)(x, dim=1, dtype=d)
    t = call(torch, torch.nn.functional, torch.tensor(a), getattr(torch, dt))
    xm = tg.tensor(a, requires_grad=True)
    m = call(tg, F, xm, getattr(tg, dt))
    assert str(m.dtype) == dt
    np.testing.assert_allclose(m.detach().numpy(), t.detach().numpy(), rtol=1e-6 if "float32" in (dt, src) else 1e-12)
    # the gradient reaches the input in its own dtype
    w = np.array([[1.0, -2.0, 0.5], [0.3, 0.2, 0.1]])
    (m * tg.tensor(w, dtype=m.dtype)).sum().backward()
    assert str(xm.grad.dtype) == src
    np.testing.assert_allclose(xm.grad.numpy(), _torch_grad(torch, call, a, dt, w),
                               rtol=1e-5 if "float32" in (dt, src) else 1e-10)


def _torch_grad(torch, call, a, dt, w):
    x = torch.tensor(a, requires_grad=True)
    y = call(torch, torch.nn.functional, x, getattr(torch, dt))
    (y * torch.tensor(w, dtype=y.dtype)).sum().backward()
    return x.grad.numpy()


def test_softmax_dtype_gradcheck():
    x = tg.tensor([[0.1, 1.2, -0.7], [2.0, 0.0, 0.5]], requires_grad=True)
    assert tg.autograd.gradcheck(lambda v: tg.softmax(v, 1, dtype=tg.float64), (x,))
    assert tg.autograd.gradgradcheck(lambda v: tg.log_softmax(v, 0, dtype=tg.float64), (x,))


def test_where_method_is_floating_point_default_dtype_as_pytorch():
    torch = pytest.importorskip("torch")
    a = np.array([1.0, -2.0, 3.0])
    t = torch.tensor(a, requires_grad=True)
    m = tg.tensor(a, requires_grad=True)
    for x, mod in ((t, torch), (m, tg)):
        y = x.where(x > 0, mod.zeros(3, dtype=mod.float64))
        (y * mod.tensor([1.0, 2.0, 3.0], dtype=mod.float64)).sum().backward()
    assert m.grad.tolist() == t.grad.tolist() == [1.0, 0.0, 3.0]
    for v in ([1.0], [1], [True]):
        assert tg.is_floating_point(tg.tensor(v)) is torch.is_floating_point(torch.tensor(v))
        assert tg.tensor(v).is_floating_point() is torch.tensor(v).is_floating_point()
    with pytest.raises(TypeError) as te:
        torch.is_floating_point(1.0)
    with pytest.raises(TypeError) as me:
        tg.is_floating_point(1.0)
    assert str(me.value) == str(te.value)
    assert tg.get_default_dtype() == tg.float64 and tg.tensor(1.0).dtype == tg.get_default_dtype()
