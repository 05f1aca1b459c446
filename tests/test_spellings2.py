"""PyTorch's other spellings (functions.py): comparisons, logical and bitwise ops as functions
and methods, addcmul/addcdiv, rsub, sgn, fix, the aliases (absolute, negative, multiply,
divide, subtract, true_divide, greater...), and the in-place variant of every elementwise
method PyTorch has one of: values and gradients against PyTorch, in place for real
(same object, version bumped), PyTorch's errors."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.functions import INPLACE_SPELLINGS

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

A = np.array([[0.3, 0.7, 0.5], [0.2, 0.9, 0.45]])
B = np.array([[0.6, 0.1, 0.5], [0.8, 0.35, 0.45]])
ROWS = np.array([0.25, 0.5, 0.75])

# method name -> (extra arguments as a function of the library L, input offset)
EXTRA = {
    "arctan2": lambda L: (L.tensor(B),), "atan2": lambda L: (L.tensor(B),), "copysign": lambda L: (L.tensor(B - 0.5),),
    "fmod": lambda L: (L.tensor(B),), "hypot": lambda L: (L.tensor(B),), "remainder": lambda L: (L.tensor(B),),
    "xlogy": lambda L: (L.tensor(B),), "lerp": lambda L: (L.tensor(B), 0.3), "clip": lambda L: (0.3, 0.6),
    "cumsum": lambda L: (1,), "polygamma": lambda L: (1,), "mvlgamma": lambda L: (2,),
    "addcmul": lambda L: (L.tensor(B), L.tensor(ROWS), ), "addcdiv": lambda L: (L.tensor(B), L.tensor(ROWS + 1)),
    "multiply": lambda L: (L.tensor(B),), "divide": lambda L: (L.tensor(B),), "subtract": lambda L: (L.tensor(B),),
    "true_divide": lambda L: (L.tensor(B),),
}
for _n in ("eq", "ne", "lt", "le", "gt", "ge", "not_equal", "less", "less_equal", "greater", "greater_equal",
           "logical_and", "logical_or", "logical_xor"):
    EXTRA[_n] = lambda L: (L.tensor(B),)
OFFSET = {"acosh": 1.5, "arccosh": 1.5, "mvlgamma": 1.0}
NO_GRAD = {"eq", "ne", "lt", "le", "gt", "ge", "not_equal", "less", "less_equal", "greater", "greater_equal",
           "logical_and", "logical_or", "logical_xor", "logical_not", "sign", "sgn", "fix", "trunc", "round",
           "ceil", "floor", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"}
# PyTorch has no derivative for these in-place variants ("the derivative for 'inplace version of
# acosh' is not implemented"): their gradient is checked against tapegrad's out-of-place op
TORCH_NO_INPLACE_GRAD = {"acosh", "arccosh", "asinh", "arcsinh", "atanh", "arctanh"}
LOOSE = {"digamma": 1e-8, "polygamma": 1e-8}      # (PyTorch's own digamma, about 5e-10 from SciPy's)
INT_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"}
FLOAT_INPLACE = sorted(n for n in INPLACE_SPELLINGS if n not in INT_ONLY and hasattr(tg.Tensor, n + "_"))


def _weights(shape):
    return np.random.default_rng(3).standard_normal(shape)


def test_every_listed_inplace_variant_exists():
    missing = [n + "_" for n in INPLACE_SPELLINGS if not hasattr(tg.Tensor, n + "_")]
    assert missing == []


@needs_torch
@pytest.mark.parametrize("name", FLOAT_INPLACE)
def test_inplace_variant_matches_torch(name):
    a = A + OFFSET.get(name, 0.0)
    args = EXTRA.get(name, lambda L: ())
    x, tx = tg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = x * 1.0, tx * 1.0
    v0 = y._version
    r, tr = getattr(y, name + "_")(*args(tg)), getattr(ty, name + "_")(*args(torch))
    assert r is y and y._version > v0
    tol = LOOSE.get(name, 1e-12)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=1e-12)
    assert y.dtype == tg.float64
    if name in NO_GRAD:
        return
    (y * tg.tensor(_weights(y.shape))).sum().backward()
    if name in TORCH_NO_INPLACE_GRAD:
        x2, tx2 = tg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        (getattr(x2, name)(*args(tg)) * tg.tensor(_weights(y.shape))).sum().backward()
        (getattr(tx2, name)(*args(torch)) * torch.tensor(_weights(y.shape))).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), x2.grad.numpy())
        np.testing.assert_allclose(x.grad.numpy(), tx2.grad.numpy(), rtol=1e-10, atol=1e-12)
        return
    (ty * torch.tensor(_weights(ty.shape))).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=max(tol, 1e-10), atol=1e-12)


@pytest.mark.parametrize("name", ["sin", "abs", "sqrt", "addcmul", "clip"])
def test_inplace_on_a_leaf_that_requires_grad_raises(name):
    x = tg.tensor(A, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        getattr(x, name + "_")(*EXTRA.get(name, lambda L: ())(tg))


# function name -> arguments(L)
FUNCTIONS = {
    "eq": lambda L: (L.tensor(A), L.tensor(B)), "ne": lambda L: (L.tensor(A), 0.5),
    "lt": lambda L: (L.tensor(A), L.tensor(B)), "le": lambda L: (L.tensor(A), 0.5),
    "gt": lambda L: (L.tensor(A), L.tensor(B)), "ge": lambda L: (L.tensor(A), 0.45),
    "greater": lambda L: (L.tensor(A), L.tensor(B)), "greater_equal": lambda L: (L.tensor(A), L.tensor(B)),
    "less": lambda L: (L.tensor(A), L.tensor(B)), "less_equal": lambda L: (L.tensor(A), L.tensor(B)),
    "not_equal": lambda L: (L.tensor(A), L.tensor(B)),
    "logical_and": lambda L: (L.tensor(A - 0.5), L.tensor([1, 0, 2])),
    "logical_or": lambda L: (L.tensor([0.0, 1.0, 0.0]), L.tensor([0, 0, 3])),
    "logical_xor": lambda L: (L.tensor([True, False, True]), L.tensor([True, True, False])),
    "logical_not": lambda L: (L.tensor([0.0, 2.0, -1.0]),),
    "bitwise_and": lambda L: (L.tensor([12, 10, 7]), L.tensor([10, 6, 3])),
    "bitwise_or": lambda L: (L.tensor([12, 10, 7]), 3),
    "bitwise_xor": lambda L: (L.tensor([True, False]), L.tensor([True, True])),
    "bitwise_not": lambda L: (L.tensor([12, -1, 0]),),
    "addcmul": lambda L: (L.tensor(A, requires_grad=True), L.tensor(B, requires_grad=True), L.tensor(ROWS)),
    "addcdiv": lambda L: (L.tensor(A, requires_grad=True), L.tensor(B), L.tensor(ROWS + 1, requires_grad=True)),
    "rsub": lambda L: (L.tensor(A, requires_grad=True), L.tensor(B, requires_grad=True)),
    "sgn": lambda L: (L.tensor(A - 0.5, requires_grad=True),),
    "fix": lambda L: (L.tensor(A * 3 - 1, requires_grad=True),),
    "absolute": lambda L: (L.tensor(A - 0.5, requires_grad=True),),
    "negative": lambda L: (L.tensor(A, requires_grad=True),),
    "multiply": lambda L: (L.tensor(A, requires_grad=True), L.tensor(B, requires_grad=True)),
    "divide": lambda L: (L.tensor(A, requires_grad=True), L.tensor(B, requires_grad=True)),
    "subtract": lambda L: (L.tensor(A, requires_grad=True), L.tensor(B, requires_grad=True)),
    "true_divide": lambda L: (L.tensor(A, requires_grad=True), L.tensor(B, requires_grad=True)),
}
KEYWORDS = {"addcmul": {"value": 0.5}, "addcdiv": {"value": -2}, "rsub": {"alpha": 3},
            "subtract": {"alpha": 2}, "divide": {"rounding_mode": None}}


@needs_torch
@pytest.mark.parametrize("name,form", [(n, f) for n in sorted(FUNCTIONS) for f in ("function", "method")
                                       if not (n == "rsub" and f == "method")])     # (rsub: a function only)
def test_function_and_method_match_torch(name, form):
    ours, theirs = FUNCTIONS[name](tg), FUNCTIONS[name](torch)
    kw = KEYWORDS.get(name, {})
    if form == "function":
        y, ty = getattr(tg, name)(*ours, **kw), getattr(torch, name)(*theirs, **kw)
    else:
        y, ty = getattr(ours[0], name)(*ours[1:], **kw), getattr(theirs[0], name)(*theirs[1:], **kw)
    assert str(y.dtype) == str(ty.dtype).replace("torch.", "")
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    if ty.requires_grad:
        (y * tg.tensor(_weights(y.shape))).sum().backward()
        (ty * torch.tensor(_weights(ty.shape))).sum().backward()
        for a, b in zip(ours, theirs):
            if isinstance(b, torch.Tensor) and b.requires_grad:
                np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(force=True), rtol=1e-12, atol=1e-12)


def test_values_without_torch():
    x = tg.tensor([1.0, -2.0, 0.5], requires_grad=True)
    np.testing.assert_array_equal(tg.addcmul(x, x, x, value=2).detach().numpy(), [3.0, 6.0, 1.0])
    np.testing.assert_array_equal(tg.rsub(x, 1.0, alpha=2).detach().numpy(), [-1.0, 5.0, 0.0])
    np.testing.assert_array_equal(tg.eq(x, 1.0).numpy(), [True, False, False])
    np.testing.assert_array_equal(tg.logical_xor(x, tg.tensor([0.0, 1.0, 1.0])).numpy(), [True, False, False])
    np.testing.assert_array_equal(tg.bitwise_not(tg.tensor([0, 5])).numpy(), [-1, -6])
    tg.addcdiv(x, x, tg.tensor([2.0, 4.0, 1.0]), value=3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.5, 1.75, 4.0])
    assert tg.tensor([1.5]).half().dtype == tg.float16 and tg.tensor([1.5]).short().dtype == tg.int16
    y = tg.tensor([1.0, 2.0])
    assert tg.exp_(y) is y and np.allclose(y.numpy(), np.exp([1.0, 2.0]))


def test_errors():
    i = tg.tensor([1, 2])
    with pytest.raises(RuntimeError, match="Integer division with addcdiv is no longer supported"):
        tg.addcdiv(i, i, i)
    with pytest.raises(TypeError, match="eq\\(\\): argument 'input' \\(position 1\\) must be Tensor, not float"):
        tg.eq(1.0, i)
    with pytest.raises(RuntimeError, match="^result type Double can't be cast to the desired output type Long$"):
        tg.addcmul(i, i, tg.ones(2), out=i)


def test_spellings_replay():
    def f(x, w):
        y = x * 1.0
        y.sin_()
        y.addcmul_(x, w, value=0.5)
        y.clip_(-0.8, 0.8)
        z = tg.addcdiv(y, x, w.abs() + 1.0) * tg.gt(x, 0.0)
        return tg.multiply(z, tg.subtract(w, 1.0, alpha=2)).sum() + tg.rsub(x, 1.0).sum()
    c = tg.compile(f)
    for seed in range(4):
        r = np.random.default_rng(seed)
        a, b = r.standard_normal(5), r.standard_normal(5)
        x1, w1 = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
        x2, w2 = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
        v1, v2 = c(x1, w1), f(x2, w2)
        v1.backward()
        v2.backward()
        np.testing.assert_allclose(v1.item(), v2.item(), rtol=1e-14)
        np.testing.assert_allclose(x1.grad.numpy(), x2.grad.numpy(), rtol=1e-13)
        np.testing.assert_allclose(w1.grad.numpy(), w2.grad.numpy(), rtol=1e-13)
    assert c.stats.replays >= 2 and c.stats.divergences == 0


def test_gradcheck_of_the_new_differentiable_spellings():
    x, y, z = (tg.tensor(np.random.default_rng(i).standard_normal(4) + 2, requires_grad=True) for i in range(3))
    for fn in (lambda a, b, c: tg.addcmul(a, b, c, value=0.3), lambda a, b, c: tg.addcdiv(a, b, c, value=-2),
               lambda a, b, c: tg.rsub(a, b, alpha=2) * c, lambda a, b, c: tg.true_divide(a, b) + tg.divide(c, b)):
        assert tg.autograd.gradcheck(fn, (x, y, z))
        assert tg.autograd.gradgradcheck(fn, (x, y, z))


# addmm, addmv, addbmm, baddbmm, addr: name -> shapes of (input, first, second)
PRODUCTS = {"addmm": ((3, 4), (3, 5), (5, 4)), "addmv": ((3,), (3, 5), (5,)), "addbmm": ((3, 4), (2, 3, 5), (2, 5, 4)),
            "baddbmm": ((2, 3, 4), (2, 3, 5), (2, 5, 4)), "addr": ((3, 4), (3,), (4,))}


def _product_args(name, L, seed=0):
    r = np.random.default_rng(seed)
    return [L.tensor(r.standard_normal(s), requires_grad=True) for s in PRODUCTS[name]]


@needs_torch
@pytest.mark.parametrize("name", sorted(PRODUCTS))
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -2.0), (0, 3)])
def test_products_match_torch(name, beta, alpha):
    ours, theirs = _product_args(name, tg), _product_args(name, torch)
    y = getattr(tg, name)(*ours, beta=beta, alpha=alpha)
    ty = getattr(torch, name)(*theirs, beta=beta, alpha=alpha)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    ym = getattr(ours[0], name)(*ours[1:], beta=beta, alpha=alpha)
    np.testing.assert_array_equal(ym.detach().numpy(), y.detach().numpy())
    (y * tg.tensor(_weights(y.shape))).sum().backward()
    (ty * torch.tensor(_weights(ty.shape))).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-12)
    # in place, on a non-leaf
    ours, theirs = _product_args(name, tg, 1), _product_args(name, torch, 1)
    z, tz = ours[0] * 1.0, theirs[0] * 1.0
    v0 = z._version
    assert getattr(z, name + "_")(*ours[1:], beta=beta, alpha=alpha) is z and z._version > v0
    getattr(tz, name + "_")(*theirs[1:], beta=beta, alpha=alpha)
    np.testing.assert_allclose(z.detach().numpy(), tz.detach().numpy(), rtol=1e-12, atol=1e-12)
    (z * tg.tensor(_weights(z.shape))).sum().backward()
    (tz * torch.tensor(_weights(tz.shape))).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_products_with_beta_zero_ignore_input_nan():
    x = tg.tensor([[float("nan"), 1.0]], requires_grad=True)
    a, b = tg.tensor([[2.0]]), tg.tensor([[3.0, 4.0]])
    y = tg.addmm(x, a, b, beta=0)
    np.testing.assert_array_equal(y.detach().numpy(), [[6.0, 8.0]])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 0.0]])
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        x.addmm_(a, b)


def test_gradcheck_of_the_products():
    for name in sorted(PRODUCTS):
        args = tuple(_product_args(name, tg, 2))
        fn = (lambda n: lambda i, p, q: getattr(tg, n)(i, p, q, beta=0.7, alpha=-1.5))(name)
        assert tg.autograd.gradcheck(fn, args)
        assert tg.autograd.gradgradcheck(fn, args)


@needs_torch
def test_clamp_min_max_positive_concatenate_match_torch():
    for name, args in [("clamp_min", (0.5,)), ("clamp_max", (0.5,))]:
        x, tx = tg.tensor(A, requires_grad=True), torch.tensor(A, requires_grad=True)
        y, ty = getattr(tg, name)(x, *args), getattr(torch, name)(tx, *args)
        np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
        np.testing.assert_array_equal(getattr(x, name)(*args).detach().numpy(), ty.detach().numpy())
        (y * tg.tensor(_weights(y.shape))).sum().backward()
        (ty * torch.tensor(_weights(ty.shape))).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
        z, tz = tg.tensor(A), torch.tensor(A)
        assert getattr(z, name + "_")(*args) is z and getattr(tg, name + "_")(z, *args) is z
        getattr(tz, name + "_")(*args)
        np.testing.assert_array_equal(z.numpy(), tz.numpy())
    x = tg.tensor(A)
    assert tg.positive(x) is x and x.positive() is x
    with pytest.raises(RuntimeError, match="The `\\+` operator, on a bool tensor is not supported."):
        tg.positive(tg.tensor([True]))
    y = tg.concatenate([tg.tensor(A), tg.tensor(B)], 1)
    np.testing.assert_array_equal(y.numpy(), torch.concatenate([torch.tensor(A), torch.tensor(B)], 1).numpy())


@needs_torch
@pytest.mark.parametrize("name", __import__("tapegrad.functions", fromlist=["x"])._TORCH_INPLACE_FUNCTIONS)
def test_inplace_function_forms_match_torch(name):
    a = A + OFFSET.get(name[:-1], 0.0)
    args = EXTRA.get(name[:-1], lambda L: ())
    x, tx = tg.tensor(a), torch.tensor(a)
    assert getattr(tg, name)(x, *args(tg)) is x
    getattr(torch, name)(tx, *args(torch))
    np.testing.assert_allclose(x.numpy(), tx.numpy(), rtol=1e-12, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("call", [("unsqueeze_", (1,)), ("unsqueeze_", (-1,)), ("squeeze_", ()), ("squeeze_", (1,))])
def test_shape_inplace_variants_match_torch(call):
    name, args = call
    a = A.reshape(2, 1, 3) if name == "squeeze_" else A
    x, tx = tg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = x * 1.0, tx * 1.0
    v0 = y._version
    assert getattr(y, name)(*args) is y and y._version > v0
    getattr(ty, name)(*args)
    assert y.shape == tuple(ty.shape)
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    (y * tg.tensor(_weights(y.shape))).sum().backward()
    (ty * torch.tensor(_weights(ty.shape))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    # a view of a non-leaf: writes through it still reach its base
    x, tx = tg.tensor(A, requires_grad=True), torch.tensor(A, requires_grad=True)
    b, tb = x * 1.0, tx * 1.0
    w, tw = b[0], tb[0]
    w.unsqueeze_(0).mul_(2.0)
    tw.unsqueeze_(0).mul_(2.0)
    np.testing.assert_array_equal(b.detach().numpy(), tb.detach().numpy())
    (b * tg.tensor(_weights(b.shape))).sum().backward()
    (tb * torch.tensor(_weights(tb.shape))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_shape_inplace_variants_errors():
    x = tg.tensor(A, requires_grad=True)
    for name in ("unsqueeze_", "squeeze_"):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            getattr(x, name)(0)
    y = x * 1.0
    z = y.sin()
    y.unsqueeze_(0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    c = tg.tensor(A)
    assert c.unsqueeze_(0).shape == (1, 2, 3) and c.squeeze_().shape == (2, 3)
