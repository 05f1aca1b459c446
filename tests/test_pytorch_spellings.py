"""The spellings PyTorch code uses: randint(high, size), the legacy Tensor(...)
constructor, formatting and iterating tensors, dim errors of squeeze, grad_fn class
names, NumPy functions on tensors, axis=, div(rounding_mode=), view(dtype), devices
and tg.compile of a module.  Each states PyTorch's result literally and, where torch
is installed, also compares with it."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn
from tapegrad.nn import functional as F


def _torch():
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float64)
    return torch


def _raises(fn):
    """(type name, message) of what ``fn()`` raises."""
    try:
        fn()
    except Exception as e:      # noqa: BLE001  (compared by type and message)
        return type(e).__name__, str(e)
    raise AssertionError("did not raise")


# -- randint ---------------------------------------------------------------------------
def test_randint_forms():
    tg.manual_seed(0)
    a = tg.randint(10, (3,))                       # randint(high, size)
    assert a.shape == (3,) and a.dtype == tg.int64 and ((a >= 0) & (a < 10)).all()
    b = tg.randint(3, 10, (2, 2))                  # randint(low, high, size)
    assert b.shape == (2, 2) and ((b >= 3) & (b < 10)).all()
    c = tg.randint(high=5, size=(4,))
    assert c.shape == (4,) and ((c >= 0) & (c < 5)).all()
    d = tg.randint(low=7, high=8, size=(3,))
    assert d.tolist() == [7, 7, 7]
    e = tg.randint(2, 3, [2])                      # a list size
    assert e.tolist() == [2, 2]
    f = tg.randint(10, (2,), dtype=tg.float64)
    assert f.dtype == tg.float64
    assert tg.randint(1, ()).shape == () and tg.randint(1, ()).item() == 0


RANDINT_BAD = [
    (lambda m: m.randint(10, 3), "TypeError", "randint(): argument 'size' (position 2) must be tuple of ints, not int"),
    (lambda m: m.randint(5, 2, (3,)), "RuntimeError",
     "random_ expects 'from' to be less than 'to', but got from=5 >= to=2"),
    (lambda m: m.randint(2.5, (3,)), "TypeError", "randint(): argument 'high' (position 1) must be int, not float"),
]


@pytest.mark.parametrize("call,kind,msg", RANDINT_BAD)
def test_randint_errors(call, kind, msg):
    assert _raises(lambda: call(tg)) == (kind, msg)


def test_randint_errors_vs_torch():
    torch = _torch()
    for call, kind, msg in RANDINT_BAD:
        assert _raises(lambda: call(torch)) == (kind, msg)
    # randint(high) alone: both refuse with the list of forms
    assert _raises(lambda: tg.randint(10))[1].startswith("randint() received an invalid combination of arguments")
    assert _raises(lambda: torch.randint(10))[1].startswith("randint() received an invalid combination")


# -- the legacy constructor -----------------------------------------------------------
def test_legacy_constructor():
    t = tg.Tensor([1, 2])
    assert t.dtype == tg.float64 and t.tolist() == [1.0, 2.0] and not t.requires_grad and t.is_leaf
    u = tg.Tensor(2, 3)
    assert u.shape == (2, 3) and u.dtype == tg.float64
    e = tg.Tensor()
    assert e.shape == (0,) and e.dtype == tg.float64
    n = tg.Tensor(np.array([1, 2], np.int32))
    assert n.dtype == tg.float64 and n.tolist() == [1.0, 2.0]
    f32 = tg.Tensor(np.array([1.5], np.float32))
    assert f32.dtype == tg.float64 and f32.tolist() == [1.5]
    assert tg.Tensor((2, 3)).tolist() == [2.0, 3.0]           # a tuple is data, not a size
    src = tg.tensor([1, 2])
    alias = tg.Tensor(src)                                    # an alias: same dtype and storage
    assert alias.dtype == tg.int64
    alias[0] = 5
    assert src.tolist() == [5, 2] and src._version == alias._version == 1
    assert _raises(lambda: tg.Tensor(2.5)) == ("TypeError", "new(): data must be a sequence (got float)")
    assert _raises(lambda: tg.Tensor(-1)) == ("RuntimeError",
                                              "Trying to create tensor with negative dimension -1: [-1]")
    assert _raises(lambda: tg.Tensor([1.0], requires_grad=True))[0] == "TypeError"
    # ordinary use of the type still works
    assert isinstance(tg.tensor(1.0), tg.Tensor) and isinstance(tg.ones(2) * 2, tg.Tensor)
    p = nn.Parameter(tg.ones(2))
    assert isinstance(p, tg.Tensor) and p.requires_grad and p.tolist() == [1.0, 1.0]
    x = tg.tensor(2.0, requires_grad=True)
    y = x * 3.0                                               # a single-number tensor (NumberTensor)
    assert isinstance(y, tg.Tensor) and y.item() == 6.0


def test_legacy_constructor_vs_torch():
    torch = _torch()
    for args in ([[1, 2]], [(2, 3)], [np.array([1, 2], np.int32)], []):
        a, b = tg.Tensor(*args), torch.Tensor(*args)
        assert a.tolist() == b.tolist() and str(b.dtype) == "torch." + a.dtype.name
    assert tuple(torch.Tensor(2, 3).shape) == tg.Tensor(2, 3).shape
    for bad in (2.5, -1):
        assert _raises(lambda: tg.Tensor(bad)) == _raises(lambda: torch.Tensor(bad))


def test_compile_with_integer_argument_keeps_watched_args_working():
    f = tg.compile(lambda x, idx: (x[idx] * 2.0).sum())
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for idx, want in (([0, 2], 8.0), ([1, 1], 8.0), ([0, 2], 8.0)):
        assert f(x, tg.tensor(idx)).item() == want


# -- formatting ------------------------------------------------------------------------
def test_format():
    loss = tg.tensor(1.5)
    assert f"{loss:.4f}" == "1.5000" and f"{loss}" == "1.5" and format(loss, "") == "1.5"
    assert f"{tg.tensor(3)}" == "3" and f"{tg.tensor(3):d}" == "3" and f"{tg.tensor(True)}" == "True"
    g = tg.tensor(1.5, requires_grad=True)
    assert f"{g:.2f}" == "1.50" and f"{g * 2.0}" == "3.0"
    assert f"{tg.tensor([1.5])}" == "tensor([1.5000])"
    assert format(tg.tensor([1.5, 2.0]), "") == "tensor([1.5000, 2.0000])"
    assert _raises(lambda: f"{tg.tensor([1.5]):.4f}") == ("TypeError",
                                                           "unsupported format string passed to Tensor.__format__")


def test_format_vs_torch():
    torch = _torch()
    for v, spec in ((1.5, ".4f"), (1.5, ""), (3, ""), (3, "d"), (True, ""), (2.25, "e")):
        assert format(tg.tensor(v), spec) == format(torch.tensor(v), spec)
    assert format(tg.tensor([1.5, 2.0]), "") == format(torch.tensor([1.5, 2.0]), "")
    assert _raises(lambda: format(tg.tensor([1.5]), ".4f")) == _raises(lambda: format(torch.tensor([1.5]), ".4f"))


# -- iteration -------------------------------------------------------------------------
def test_iteration():
    assert _raises(lambda: list(tg.tensor(1.0))) == ("TypeError", "iteration over a 0-d tensor")
    x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    rows = list(x)
    assert [r.tolist() for r in rows] == [[1.0, 2.0], [3.0, 4.0]]
    (rows[0].sum() + 2 * rows[1].sum()).backward()
    assert x.grad.tolist() == [[1.0, 1.0], [2.0, 2.0]]
    assert [v.item() for v in tg.tensor([5, 6, 7])] == [5, 6, 7]
    a, b = tg.tensor([1.0, 2.0])                              # unpacking
    assert (a.item(), b.item()) == (1.0, 2.0)
    assert list(tg.zeros(0, 3)) == []


def test_iteration_vs_torch():
    torch = _torch()
    assert _raises(lambda: list(tg.tensor(1.0))) == _raises(lambda: list(torch.tensor(1.0)))
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    rows = list(x)
    (rows[0].sum() + 2 * rows[1].sum()).backward()
    assert x.grad.tolist() == [[1.0, 1.0], [2.0, 2.0]]


# -- squeeze / unsqueeze dims ------------------------------------------------------------
SQUEEZE_CASES = [
    (lambda m: m.tensor(1.5).squeeze(10), "IndexError",
     "Dimension out of range (expected to be in range of [-1, 0], but got 10)"),
    (lambda m: m.tensor(1.5).squeeze(-2), "IndexError",
     "Dimension out of range (expected to be in range of [-1, 0], but got -2)"),
    (lambda m: m.zeros(2, 3).squeeze(2), "IndexError",
     "Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
    (lambda m: m.zeros(2, 3).squeeze((0, 5)), "IndexError",
     "Dimension out of range (expected to be in range of [-2, 1], but got 5)"),
    (lambda m: m.tensor(1.5).squeeze((0, 0)), "RuntimeError", "dim 0 appears multiple times in the list of dims"),
    (lambda m: m.zeros(2, 3).unsqueeze(3), "IndexError",
     "Dimension out of range (expected to be in range of [-3, 2], but got 3)"),
    (lambda m: m.zeros(2, 3).unsqueeze(-4), "IndexError",
     "Dimension out of range (expected to be in range of [-3, 2], but got -4)"),
    (lambda m: m.tensor(1.5).unsqueeze(2), "IndexError",
     "Dimension out of range (expected to be in range of [-1, 0], but got 2)"),
]


@pytest.mark.parametrize("call,kind,msg", SQUEEZE_CASES)
def test_squeeze_dim_errors(call, kind, msg):
    assert _raises(lambda: call(tg)) == (kind, msg)


def test_squeeze_dim_errors_vs_torch():
    torch = _torch()
    for call, kind, msg in SQUEEZE_CASES:
        assert _raises(lambda: call(torch)) == (kind, msg)


def test_squeeze_valid_dims_of_0d():
    for d in (0, -1, (0,)):
        assert tg.tensor(1.5).squeeze(d).shape == ()
    assert tg.zeros(1, 2, 1).squeeze((0, 2)).shape == (2,)
    assert tg.tensor(1.5).unsqueeze(0).shape == (1,) and tg.tensor(1.5).unsqueeze(-1).shape == (1,)


# -- grad_fn classes ----------------------------------------------------------------------
def test_grad_fn_class_names():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    s = y.sum()
    assert type(y.grad_fn).__name__ == "MulBackward0" and type(s.grad_fn).__name__ == "SumBackward0"
    assert y.grad_fn.name() == "MulBackward0"
    assert repr(y.grad_fn).startswith("<MulBackward0 object at 0x")
    assert type(s.grad_fn.next_functions[0][0]) is type(y.grad_fn)
    assert s.grad_fn.next_functions[0][0] == y.grad_fn
    assert type(y.grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"
    assert type((x * 2.0).grad_fn) is type(y.grad_fn)        # one class per name
    assert isinstance(y.grad_fn, tg.autograd.graph.Node)
    seen = []
    h = y.register_hook(lambda g: seen.append(g.tolist()))
    s.backward()
    assert seen == [[1.0, 1.0]] and x.grad.tolist() == [2.0, 4.0]
    h.remove()


def test_grad_fn_class_names_vs_torch():
    torch = _torch()
    for make in (lambda m, x: x * x, lambda m, x: x.sum(), lambda m, x: m.exp(x), lambda m, x: x[0],
                 lambda m, x: x.reshape(2, 1), lambda m, x: x / 3.0):
        a = make(tg, tg.tensor([1.0, 2.0], requires_grad=True))
        b = make(torch, torch.tensor([1.0, 2.0], requires_grad=True))
        assert type(a.grad_fn).__name__ == type(b.grad_fn).__name__


# -- NumPy functions on tensors -----------------------------------------------------------
def test_numpy_ufuncs_return_tensors():
    t = tg.tensor([1.0, 2.0])
    s = np.sin(t)
    assert type(s) is tg.Tensor and s.dtype == tg.float64 and not s.requires_grad
    assert np.allclose(s.numpy(), [0.8414709848078965, 0.9092974268256817])
    z = np.sin(tg.tensor(1.0))
    assert type(z) is tg.Tensor and z.shape == () and np.isclose(z.item(), 0.8414709848078965)
    assert np.add(t, 1).tolist() == [2.0, 3.0] and np.add(t, t).tolist() == [2.0, 4.0]
    g = np.greater(t, 1.5)
    assert g.dtype == np.uint8 and g.tolist() == [0, 1]      # PyTorch's bool results come back as uint8
    f32 = np.sqrt(tg.tensor([1.0, 4.0], dtype=tg.float32))
    assert f32.dtype == tg.float32 and f32.tolist() == [1.0, 2.0]
    q, r = np.modf(tg.tensor([1.5, 2.0]))
    assert type(q) is tg.Tensor and q.tolist() == [0.5, 0.0] and r.tolist() == [1.0, 2.0]
    a = np.asarray(t)
    assert type(a) is np.ndarray and a.tolist() == [1.0, 2.0]
    assert _raises(lambda: np.sin(tg.tensor([1.0], requires_grad=True))) == (
        "RuntimeError", "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")


def test_numpy_reductions_return_tensors():
    # (more permissive than PyTorch, which raises TypeError for most: docs/differences.md)
    t = tg.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert np.sum(t).item() == 10.0 and type(np.sum(t)) is tg.Tensor
    assert np.mean(t).item() == 2.5 and np.max(t).item() == 4.0 and np.prod(t).item() == 24.0
    assert np.argmax(t).item() == 3 and np.any(t > 3).item() is True


def test_numpy_ufuncs_vs_torch():
    torch = _torch()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)     # torch's __array_wrap__ signature
        for f in (np.sin, np.exp, np.negative, lambda v: np.add(v, 1), lambda v: np.greater(v, 1.5)):
            a, b = f(tg.tensor([1.0, 2.0])), f(torch.tensor([1.0, 2.0]))
            assert type(b).__name__ == "Tensor" and type(a) is tg.Tensor
            assert np.allclose(a.numpy(), b.numpy()) and a.dtype.name == str(b.dtype)[6:]
            assert a.requires_grad == b.requires_grad == False      # noqa: E712
        assert _raises(lambda: np.sin(tg.tensor([1.0], requires_grad=True))) == \
            _raises(lambda: np.sin(torch.tensor([1.0], requires_grad=True)))


# -- axis= and keepdims= -------------------------------------------------------------------
A = [[1.0, 2.0, 3.0], [4.0, 6.0, 8.0]]
AXIS_FUNCS = ["sum", "mean", "max", "min", "var", "std", "prod", "amax", "amin", "argmax", "argmin",
              "logsumexp", "softmax", "log_softmax", "any", "all"]


def _value(r):
    r = r[0] if isinstance(r, tuple) else r
    return r.tolist()


@pytest.mark.parametrize("name", AXIS_FUNCS)
def test_axis_alias(name):
    a = tg.tensor(A)
    if name in ("any", "all"):
        a = a > 2.0
    want = _value(getattr(tg, name)(a, dim=1))
    assert _value(getattr(tg, name)(a, axis=1)) == want
    assert _value(getattr(a, name)(axis=1)) == want
    if name not in ("softmax", "log_softmax"):
        kept = getattr(tg, name)(a, axis=1, keepdims=True)
        assert (kept[0] if isinstance(kept, tuple) else kept).shape == (2, 1)


def test_axis_alias_values():
    a = tg.tensor(A)
    assert tg.sum(a, axis=1).tolist() == [6.0, 18.0]
    assert a.mean(axis=0).tolist() == [2.5, 4.0, 5.5]
    assert a.max(axis=1).values.tolist() == [3.0, 8.0] and a.max(axis=1).indices.tolist() == [2, 2]
    assert tg.sum(a, axis=1, keepdims=True).tolist() == [[6.0], [18.0]]
    assert tg.cat([a, a], axis=1).shape == (2, 6) and tg.stack([a, a], axis=1).shape == (2, 2, 3)
    assert tg.zeros(2, 1).squeeze(axis=1).shape == (2,) and tg.zeros(2).unsqueeze(axis=0).shape == (1, 2)
    assert (a > 2).all(axis=1).tolist() == [False, True] and (a > 2).any(axis=0).tolist() == [True, True, True]


def test_axis_alias_gradient():
    x = tg.tensor(A, requires_grad=True)
    assert tg.autograd.gradcheck(lambda v: v.sum(axis=1) * v.mean(axis=1, keepdims=False), (x,))
    assert tg.autograd.gradcheck(lambda v: tg.logsumexp(v, axis=0), (x,))


def test_bad_keyword_names_the_public_function():
    a = tg.tensor(A)
    for call, msg in ((lambda: tg.sum(a, foo=1), "sum() got an unexpected keyword argument 'foo'"),
                      (lambda: a.sum(foo=1), "sum() got an unexpected keyword argument 'foo'"),
                      (lambda: a.max(foo=1), "max() got an unexpected keyword argument 'foo'"),
                      (lambda: a.mean(foo=1), "mean() got an unexpected keyword argument 'foo'"),
                      (lambda: tg.softmax(a, foo=1), "softmax() got an unexpected keyword argument 'foo'"),
                      (lambda: (a > 1).all(foo=1), "all() got an unexpected keyword argument 'foo'"),
                      (lambda: tg.sum(a, dim=1, axis=0), "sum() got multiple values for argument 'dim'"),
                      (lambda: tg.sum(a, out=[a]), "sum(): argument 'out' must be Tensor, not list")):
        assert _raises(call) == ("TypeError", msg)
    assert _raises(lambda: tg.logsumexp(a)) == ("TypeError", "logsumexp() missing 1 required positional "
                                                             "argument: 'dim'")


def test_axis_alias_vs_torch():
    torch = _torch()
    for name in AXIS_FUNCS:
        a, b = tg.tensor(A), torch.tensor(A)
        if name in ("any", "all"):
            a, b = a > 2.0, b > 2.0
        assert np.allclose(_value(getattr(tg, name)(a, axis=1)), _value(getattr(torch, name)(b, axis=1)))
        assert np.allclose(_value(getattr(a, name)(axis=0)), _value(getattr(b, name)(axis=0)))
    # PyTorch refuses an unknown keyword with a TypeError that names the function too
    assert _raises(lambda: torch.sum(torch.ones(2), foo=1))[0] == "TypeError"
    assert "sum()" in _raises(lambda: torch.sum(torch.ones(2), foo=1))[1]


# -- div(rounding_mode=) ---------------------------------------------------------------------
def test_div_rounding_values():
    a, b = tg.tensor([7.0, -7.0, 5.5]), tg.tensor([2.0, 2.0, -2.0])
    assert tg.div(a, b, rounding_mode="trunc").tolist() == [3.0, -3.0, -2.0]
    assert tg.div(a, b, rounding_mode="floor").tolist() == [3.0, -4.0, -3.0]
    assert tg.div(a, b, rounding_mode=None).tolist() == [3.5, -3.5, -2.75]
    assert a.div(2, rounding_mode="floor").tolist() == [3.0, -4.0, 2.0]
    assert tg.div(7, tg.tensor([2.0, 3.0]), rounding_mode="floor").tolist() == [3.0, 2.0]
    assert tg.div(tg.tensor([1.0]), tg.tensor([0.1]), rounding_mode="floor").tolist() == [9.0]   # as 1.0 // 0.1
    neg_zero = tg.div(tg.tensor([-0.5]), 1, rounding_mode="trunc")
    assert neg_zero.tolist() == [0.0] and np.signbit(neg_zero.numpy()[0])
    z = tg.div(tg.tensor([7.0, -7.0, 0.0]), 0.0, rounding_mode="floor").numpy()
    assert z[0] == np.inf and z[1] == -np.inf and np.isnan(z[2])
    i = tg.tensor([7, -7])
    t, f = tg.div(i, 2, rounding_mode="trunc"), tg.div(i, 2, rounding_mode="floor")
    assert t.dtype == f.dtype == tg.int64 and t.tolist() == [3, -3] and f.tolist() == [3, -4]
    i32 = tg.div(tg.tensor([7, -7], dtype=tg.int32), 2, rounding_mode="floor")
    assert i32.dtype == tg.int32 and i32.tolist() == [3, -4]
    assert tg.div(i, 2.5, rounding_mode="floor").tolist() == [2.0, -3.0]
    assert tg.div(i, 2).dtype == tg.float64
    f32 = tg.div(tg.tensor([5.0], dtype=tg.float32), 2, rounding_mode="floor")
    assert f32.dtype == tg.float32 and f32.tolist() == [2.0]
    v = tg.tensor([7.0, -7.0])
    v.div_(2, rounding_mode="trunc")
    assert v.tolist() == [3.0, -3.0]


def test_floor_divide():
    i = tg.tensor([7, -7])
    assert (i // 2).tolist() == [3, -4] and (i // 2).dtype == tg.int64
    assert (7 // tg.tensor([2, -2])).tolist() == [3, -4]
    assert (tg.tensor([7.5]) // tg.tensor([2.0])).tolist() == [3.0]
    assert (tg.tensor([7]) // 0.5).tolist() == [14.0]
    assert tg.floor_divide(i, 2).tolist() == [3, -4] and i.floor_divide(-2).tolist() == [-4, 3]
    j = tg.tensor([7, -7])
    j //= 2
    assert j.tolist() == [3, -4]
    x = tg.tensor([7.0, -7.0], requires_grad=True)
    y = x // 2
    assert y.tolist() == [3.0, -4.0] and not y.requires_grad     # PyTorch: no derivative (docs/differences.md)
    assert _raises(lambda: tg.tensor([True]) // tg.tensor([True])) == (
        "NotImplementedError", "\"div_floor_cpu\" not implemented for 'Bool'")


def test_floor_divide_vs_torch():
    torch = _torch()
    for a, b in (([7, -7, 9], 2), ([7.5, -7.5, 0.3], 0.1), ([7, -7, 9], -2.5)):
        assert (tg.tensor(a) // b).tolist() == (torch.tensor(a) // b).tolist()
        assert str((torch.tensor(a) // b).dtype)[6:] == (tg.tensor(a) // b).dtype.name


def test_div_rounding_errors():
    assert _raises(lambda: tg.div(tg.tensor([7.0]), 2, rounding_mode="bad")) == (
        "RuntimeError", "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'bad'")
    assert _raises(lambda: tg.div(tg.tensor([7]), 0, rounding_mode="floor")) == ("RuntimeError", "ZeroDivisionError")
    assert _raises(lambda: tg.div(tg.tensor([True]), tg.tensor([True]), rounding_mode="trunc")) == (
        "NotImplementedError", "\"div_trunc_cpu\" not implemented for 'Bool'")


def test_div_rounding_gradient_is_zero():
    a = tg.tensor([7.0, -7.0, 5.5], requires_grad=True)
    b = tg.tensor([2.0, 3.0, -2.0], requires_grad=True)
    for mode in ("trunc", "floor"):
        y = tg.div(a, b, rounding_mode=mode)
        assert type(y.grad_fn).__name__ == "DivBackward2"
        ga, gb = tg.autograd.grad(y.sum(), (a, b))
        assert ga.tolist() == [0.0, 0.0, 0.0] and gb.tolist() == [0.0, 0.0, 0.0]
        g2, = tg.autograd.grad(tg.div(a, 2.0, rounding_mode=mode).sum(), a, create_graph=True)
        assert g2.tolist() == [0.0, 0.0, 0.0]


def test_div_rounding_replays():
    f = tg.compile(lambda x: (tg.div(x, 2.0, rounding_mode="floor") * x).sum())
    for vals in ([3.0, -3.0], [5.0, -1.0], [3.0, -3.0]):
        x = tg.tensor(vals, requires_grad=True)
        out = f(x)
        out.backward()
        assert out.item() == sum((v // 2.0) * v for v in vals)
        assert x.grad.tolist() == [v // 2.0 for v in vals]


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_div_rounding_replays_single_numbers(mode):
    # a tape of single numbers replays in its own compiled loop (the rows' one-float forwards)
    import math
    f = tg.compile(lambda x, y: tg.div(x, y, rounding_mode=mode) * x + tg.div(x, 0.7, rounding_mode=mode))
    for v, d in ((3.5, 2.0), (-3.5, 2.0), (7.25, 2.0), (-0.5, 2.0), (1.0, 0.1), (3.5, 2.0)):
        x = tg.tensor(v, requires_grad=True)
        out = f(x, tg.tensor(d))
        out.backward()
        q = v // d if mode == "floor" else float(math.trunc(v / d))
        q2 = v // 0.7 if mode == "floor" else float(math.trunc(v / 0.7))
        assert out.item() == q * v + q2 and x.grad.item() == q
    assert f.stats.replays == 5


def test_div_rounding_vs_torch():
    torch = _torch()
    rng = np.random.default_rng(0)
    for dt in ("float64", "float32", "int64", "int32"):
        x = (rng.standard_normal(20) * 10).astype(dt)
        y = (rng.standard_normal(20) * 3).astype(dt)
        y[y == 0] = 1
        for mode in ("trunc", "floor", None):
            a = tg.div(tg.tensor(x), tg.tensor(y), rounding_mode=mode)
            b = torch.div(torch.tensor(x), torch.tensor(y), rounding_mode=mode)
            assert a.dtype.name == str(b.dtype)[6:]
            assert np.array_equal(a.numpy(), b.numpy())
            a, b = tg.div(tg.tensor(x), 3, rounding_mode=mode), torch.div(torch.tensor(x), 3, rounding_mode=mode)
            assert a.dtype.name == str(b.dtype)[6:] and np.array_equal(a.numpy(), b.numpy())
    for bad in (lambda m: m.div(m.tensor([7.0]), 2, rounding_mode="bad"),
                lambda m: m.div(m.tensor([7]), 0, rounding_mode="floor"),
                lambda m: m.div(m.tensor([True]), m.tensor([True]), rounding_mode="floor")):
        assert _raises(lambda: bad(tg)) == _raises(lambda: bad(torch))


# -- view(dtype) -------------------------------------------------------------------------
def test_view_dtype():
    x = tg.tensor([1.0, 2.0])
    assert x.view(tg.int64).tolist() == [4607182418800017408, 4611686018427387904]
    assert x.view(tg.float32).tolist() == [0.0, 1.875, 0.0, 2.0]
    assert tg.zeros(3).view(tg.float32).shape == (6,)
    assert tg.zeros(2, 4, dtype=tg.float32).view(tg.float64).shape == (2, 2)
    assert x.view(dtype=tg.int64).dtype == tg.int64
    assert tg.zeros((), dtype=tg.float64).view(tg.int64).shape == ()
    r = tg.tensor([1.0, 2.0], requires_grad=True)
    v = r.view(tg.float64)
    assert not v.requires_grad and v.grad_fn is None and v.tolist() == [1.0, 2.0]
    d = r.detach()
    bits = d.view(tg.int64)
    bits[0] = 0                                               # shares storage and version
    assert d.tolist() == [0.0, 2.0] and d._version == 1


VIEW_BAD = [
    (lambda m: m.zeros(3, dtype=m.float32).view(m.float64), "RuntimeError",
     "self.size(-1) must be divisible by 2 to view Float as Double (different element sizes), but got 3"),
    (lambda m: m.zeros((), dtype=m.float64).view(m.float32), "RuntimeError",
     "self.dim() cannot be 0 to view Double as Float (different element sizes)"),
    (lambda m: m.zeros(4, 2, dtype=m.float32).t().view(m.float64), "RuntimeError",
     "self.stride(-1) must be 1 to view Float as Double (different element sizes), but got 2"),
]


@pytest.mark.parametrize("call,kind,msg", VIEW_BAD)
def test_view_dtype_errors(call, kind, msg):
    assert _raises(lambda: call(tg)) == (kind, msg)


def test_view_dtype_vs_torch():
    torch = _torch()
    for call, kind, msg in VIEW_BAD:
        assert _raises(lambda: call(torch)) == (kind, msg)
    x = np.array([[1.5, -2.0, 3.25, 4.0]])
    for dt in ("int64", "float32", "int32"):
        a = tg.tensor(x).view(getattr(tg, dt))
        b = torch.tensor(x).view(getattr(torch, dt))
        assert a.tolist() == b.tolist()
    assert tg.zeros(4, 2, dtype=tg.float32).t().view(tg.int32).tolist() == \
        torch.zeros(4, 2, dtype=torch.float32).t().view(torch.int32).tolist()


# -- devices --------------------------------------------------------------------------
CUDA = ("AssertionError", "Torch not compiled with CUDA enabled")


def test_cuda_raises():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    for call in (lambda: x.to("cuda"), lambda: x.cuda(), lambda: x.to(device="cuda:0"),
                 lambda: x.to(tg.device("cuda")), lambda: x.to("cuda", tg.float32),
                 lambda: tg.tensor([1.0], device="cuda"), lambda: tg.randint(3, (2,), device="cuda")):
        assert _raises(call) == CUDA


def test_cpu_works():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    assert x.to("cpu") is x and x.cpu() is x and x.to(tg.device("cpu")) is x and x.to("cpu:0") is x
    f = x.to(tg.float32)
    assert f.dtype == tg.float32 and type(f.grad_fn).__name__ == "ToCopyBackward0"
    assert x.to(tg.tensor([1], dtype=tg.int32)).dtype == tg.int32
    assert x.to("cpu", tg.float32).dtype == tg.float32 and x.to("cpu", dtype=tg.float32).dtype == tg.float32
    assert x.to(device="cpu", dtype=tg.float32).dtype == tg.float32
    assert x.to(tg.float64) is x and x.to() is x
    c = x.to(tg.float64, copy=True)
    assert c is not x and c.tolist() == [1.0, 2.0] and type(c.grad_fn).__name__ == "CloneBackward0"
    assert x.to("cpu", non_blocking=True) is x
    assert _raises(lambda: x.to(tg.float32, tg.float64))[1].startswith(
        "to() received an invalid combination of arguments - got (dtype, dtype)")
    assert _raises(lambda: x.to("foo"))[1].endswith("device type at start of device string: foo")


def test_device_object():
    x = tg.tensor([1.0])
    d = x.device
    assert str(d) == "cpu" and repr(d) == "device(type='cpu')" and d.type == "cpu" and d.index is None
    assert d == tg.device("cpu") and d != tg.device("cuda") and hash(d) == hash(tg.device("cpu"))
    assert (d == "cpu") is False            # a device is not equal to a string, as in PyTorch
    assert not x.is_cuda
    assert str(tg.device("cuda:1")) == "cuda:1" and tg.device("cuda", 0).index == 0
    assert repr(tg.device("cuda", 0)) == "device(type='cuda', index=0)"
    assert _raises(lambda: tg.device("tpu"))[1].startswith("Expected one of cpu, cuda,")


def test_devices_vs_torch():
    torch = _torch()
    for call in (lambda m, x: x.to("cuda"), lambda m, x: x.cuda(), lambda m, x: x.to(device="cuda:0"),
                 lambda m, x: x.to(m.device("cuda")), lambda m, x: m.tensor([1.0], device="cuda"),
                 lambda m, x: x.to("foo"), lambda m, x: m.device("tpu"), lambda m, x: x.to("mps"),
                 lambda m, x: m.device(3)):
        assert _raises(lambda: call(tg, tg.ones(2))) == _raises(lambda: call(torch, torch.ones(2)))
    assert str(tg.ones(1).device) == str(torch.ones(1).device)
    assert repr(tg.device("cuda:1")) == repr(torch.device("cuda:1"))
    assert (torch.ones(1).device == "cpu") is (tg.ones(1).device == "cpu")


# -- tg.compile of a module ---------------------------------------------------------------
def test_compile_module_is_a_module():
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    c = tg.compile(model)
    assert isinstance(c, nn.Module) and c._orig_mod is model
    assert type(c).__name__ == "OptimizedModule"
    names = [n for n, _ in c.named_parameters()]
    assert names == ["_orig_mod.0.weight", "_orig_mod.0.bias", "_orig_mod.2.weight", "_orig_mod.2.bias"]
    assert [p for p in c.parameters()] == [p for p in model.parameters()] or \
        all(a is b for a, b in zip(c.parameters(), model.parameters()))
    assert list(c.state_dict()) == names
    assert getattr(c, "0") is model[0]                       # attributes reach the original module
    assert c.eval() is c and not model.training and not c.training
    assert c.train() is c and model.training
    X = tg.tensor([[1.0, 2.0], [-1.0, 0.5], [0.0, 3.0]])
    want = model(X).sum()
    want.backward()
    want_grad = model[0].weight.grad.tolist()
    for _ in range(3):
        c.zero_grad()
        assert model[0].weight.grad is None
        out = c(X).sum()
        out.backward()
        assert out.item() == want.item() and model[0].weight.grad.tolist() == want_grad
    assert c._compiled.stats.replays == 2
    sd = {k: v.detach() * 0 for k, v in c.state_dict().items()}
    assert repr(c.load_state_dict(sd)) == "<All keys matched successfully>"
    assert model[0].weight.tolist() == [[0.0, 0.0]] * 3
    assert repr(c).startswith("OptimizedModule(\n  (_orig_mod): Sequential(")


def test_compile_module_vs_torch():
    torch = _torch()
    tm = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU())
    m = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    tc, c = torch.compile(tm), tg.compile(m)
    assert [n for n, _ in tc.named_parameters()] == [n for n, _ in c.named_parameters()]
    assert list(tc.state_dict()) == list(c.state_dict())
    assert [n for n, _ in tc.named_modules()] == [n for n, _ in c.named_modules()]
    assert isinstance(tc, torch.nn.Module) and isinstance(c, nn.Module)


# -- signatures made PyTorch's (keywords that now work) -------------------------------------
def test_torch_keyword_names():
    a, b = tg.tensor([[1.0, 2.0]]), tg.tensor([[3.0], [4.0]])
    assert tg.mm(input=a, mat2=b).tolist() == [[11.0]] and tg.matmul(input=a, other=b).tolist() == [[11.0]]
    assert tg.add(input=a, other=a, alpha=2).tolist() == [[3.0, 6.0]]
    assert tg.sin(input=tg.tensor(0.0)).item() == 0.0
    assert tg.where(tg.tensor([True, False]), input=tg.tensor([1.0, 2.0]), other=0.0).tolist() == [1.0, 0.0]
    assert tg.zeros_like(input=a).tolist() == [[0.0, 0.0]]
    assert tg.from_numpy(ndarray=np.ones(2)).tolist() == [1.0, 1.0]
    assert tg.amax(a).item() == 2.0 and tg.amax(a, dim=None).item() == 2.0
    assert _raises(lambda: tg.arange(0, 3, 1, tg.int64))[0] == "TypeError"     # dtype is keyword-only
    assert tg.arange(3, dtype=tg.int64).tolist() == [0, 1, 2]
    assert tg.tensor([1, 2]).type_as(tensor=tg.tensor(1.0)).dtype == tg.float64
    x = tg.tensor([1.0, 2.0])
    assert x.numpy(force=True).tolist() == [1.0, 2.0]
    assert _raises(lambda: x.numpy(True))[0] == "TypeError"                    # force is keyword-only


def test_legacy_loss_arguments():
    x, y = tg.tensor([1.0, 2.0, 4.0]), tg.tensor([0.0, 0.0, 0.0])
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated, please use "
                                         "reduction='sum' instead."):
        assert F.mse_loss(x, y, size_average=False).item() == 21.0
    with pytest.warns(UserWarning):
        assert F.l1_loss(x, y, reduce=False).tolist() == [1.0, 2.0, 4.0]
    with pytest.warns(UserWarning):
        assert nn.MSELoss(size_average=False)(x, y).item() == 21.0
    logits, labels = tg.tensor([[1.0, 2.0], [0.5, 0.0]]), tg.tensor([1, 0])
    with pytest.warns(UserWarning):
        per = F.cross_entropy(logits, labels, reduce=False)
    assert per.shape == (2,) and np.isclose(per.sum().item(), F.cross_entropy(logits, labels, reduction="sum").item())
    assert _raises(lambda: F.mse_loss(x, y, weight=tg.ones(3))) == (
        "NotImplementedError", "weight= of mse_loss is not supported by tapegrad")


def test_legacy_loss_arguments_vs_torch():
    torch = _torch()
    import warnings
    x, y = np.array([1.0, 2.0, 4.0]), np.array([0.0, 0.5, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kw in ({"size_average": False}, {"reduce": False}, {"size_average": True, "reduce": True}):
            a = F.mse_loss(tg.tensor(x), tg.tensor(y), **kw)
            b = torch.nn.functional.mse_loss(torch.tensor(x), torch.tensor(y), **kw)
            assert np.allclose(a.numpy(), b.numpy())


def test_optimizer_implementation_options():
    p = nn.Parameter(tg.tensor([1.0, 2.0]))
    for opt in (tg.optim.SGD([p], lr=0.1, foreach=True, fused=False),
                tg.optim.Adam([p], foreach=False, capturable=False, fused=None),
                tg.optim.AdamW([p], foreach=True)):
        p.grad = tg.tensor([1.0, 1.0])
        opt.step()
    assert _raises(lambda: tg.optim.Adam([p], differentiable=True)) == (
        "NotImplementedError", "differentiable=True is not supported by tapegrad's optimizers")


def test_adam_decoupled_weight_decay_is_adamw():
    p1, p2 = nn.Parameter(tg.tensor([1.0, -2.0])), nn.Parameter(tg.tensor([1.0, -2.0]))
    o1 = tg.optim.Adam([p1], lr=0.1, weight_decay=0.5, decoupled_weight_decay=True)
    o2 = tg.optim.AdamW([p2], lr=0.1, weight_decay=0.5)
    for _ in range(3):
        for p, o in ((p1, o1), (p2, o2)):
            p.grad = p.detach() * 2.0
            o.step()
    assert p1.tolist() == p2.tolist() and p1.tolist() != [1.0, -2.0]


def test_integer_division_by_a_zero_d_tensor_keeps_the_dimensioned_dtype():
    # PyTorch's categories: a 0-d int64 tensor does not raise an int32 tensor's dtype
    a = tg.tensor([7, -7], dtype=tg.int32)
    for q, expected in ((a // tg.tensor(2), [3, -4]), (tg.div(a, tg.tensor(2), rounding_mode="trunc"), [3, -3]),
                        (tg.div(a, tg.tensor(2), rounding_mode="floor"), [3, -4])):
        assert q.dtype == tg.int32
        assert q.tolist() == expected
    assert (a // tg.tensor([2, 2])).dtype == tg.int64      # (two dimensioned tensors promote)
