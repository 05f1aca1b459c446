"""Result dtypes (and values, and errors) of every binary op, operator, unary op
and reduction over every operand kind, against PyTorch's.

The cases are tests/dtype_cases.py; PyTorch's results for them are the table
tests/data/dtype_promotion.json (written by tests/data/make_dtype_table.py with
PyTorch's default dtype set to float64, tapegrad's), so the test runs without
PyTorch; with PyTorch installed it also recomputes the table live.  Below the
table, the reported cases in plain form, with their values stated."""
import collections
import json
import math
import os
import warnings

import numpy as np
import pytest

import dtype_cases
import tapegrad as tg

TABLE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "dtype_promotion.json")
with open(TABLE_PATH) as _f:
    TABLE = json.load(_f)["cases"]

CASES = dtype_cases.cases()
BY_OP = collections.defaultdict(list)
for _key, _op, _fn in CASES:
    BY_OP[_op].append((_key, _fn))


def _same(expected, got):
    """Whether two outcomes (dtype_cases.outcome) agree: the same error type, or the
    same dtypes and values (float32 to its precision)."""
    if "error" in expected or "error" in got:
        return expected.get("error") == got.get("error")
    if expected["dtype"] != got["dtype"]:
        return False
    for dt, e, g in zip(expected["dtype"], expected["value"], got["value"]):
        e, g = np.asarray(e, np.float64), np.asarray(g, np.float64)
        tol = {"float32": 1e-6, "float16": 1e-3}.get(dt, 1e-12)
        if e.shape != g.shape or not np.allclose(e, g, rtol=tol, atol=tol, equal_nan=True):
            return False
    return True


def _outcomes(L, cases):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (var of one element: nan with a warning)
        return {key: dtype_cases.outcome(L, fn) for key, fn in cases}


def test_table_covers_every_case():
    assert set(TABLE) == {key for key, _, _ in CASES}, "cases changed: run tests/data/make_dtype_table.py"
    assert len(TABLE) > 4000


@pytest.mark.parametrize("op", sorted(BY_OP))
def test_against_table(op):
    got = _outcomes(tg, BY_OP[op])
    wrong = ["%s: torch %s, tapegrad %s" % (k, TABLE[k].get("error") or TABLE[k]["dtype"],
                                             g.get("error") or g["dtype"])
             for k, g in got.items() if not _same(TABLE[k], g)]
    assert not wrong, "\n".join(wrong)


def test_table_is_pytorchs():
    torch = pytest.importorskip("torch")
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        live = _outcomes(torch, [(key, fn) for key, _, fn in CASES])
    finally:
        torch.set_default_dtype(old)
    stale = [k for k, v in live.items() if not _same(v, TABLE[k])]
    assert not stale, "the table differs from PyTorch %s here: %s" % (torch.__version__, stale[:20])


# -- the reported cases, in plain form ---------------------------------------------------
def _t(data, dtype):
    return tg.tensor(data, dtype=dtype)


def test_int32_bitwise_with_a_number_keeps_int32():
    a = _t([5, 6, 12], tg.int32)
    for r, values in ((a & 4, [4, 4, 4]), (a | 1, [5, 7, 13]), (a ^ 3, [6, 5, 15]), (3 ^ a, [6, 5, 15])):
        assert r.dtype == tg.int32 and r.tolist() == values
    assert (a & 2 ** 40).tolist() == [0, 0, 0]         # the number wraps to int32, as in PyTorch
    with pytest.raises(NotImplementedError, match="\"bitwise_and_cpu\" not implemented for 'Double'"):
        a & 1.5
    with pytest.raises(NotImplementedError, match="\"bitwise_or_cpu\" not implemented for 'Float'"):
        _t([1.0], tg.float32) | a
    with pytest.raises(TypeError, match="only implemented on integer and Boolean"):
        ~tg.tensor([1.0])


def test_integer_pow():
    a = tg.tensor([1, 2, 3])
    r = a ** 2.0
    assert r.dtype == tg.float64 and r.tolist() == [1.0, 4.0, 9.0]
    assert (tg.tensor([True, False]) ** 2.0).dtype == tg.float64
    assert (a ** 0.5).dtype == (a ** 1.5).dtype == (a ** -1.0).dtype == tg.float64
    r = a ** 2
    assert r.dtype == tg.int64 and r.tolist() == [1, 4, 9]
    r = _t([2, 3], tg.int32) ** tg.tensor(2)
    assert r.dtype == tg.int32 and r.tolist() == [4, 9]      # a 0-d exponent does not raise the dtype
    r = tg.tensor([2, 3, 1, -1, -1]) ** tg.tensor([-1, 2, -3, -3, -2])
    assert r.dtype == tg.int64 and r.tolist() == [0, 9, 1, -1, 1]   # PyTorch's integer power
    assert (2 ** tg.tensor([-1, 2])).tolist() == [0, 4]
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed."):
        a ** -1
    r = 2.5 ** a
    assert r.dtype == tg.float64 and r.tolist() == [2.5, 6.25, 15.625]
    with pytest.raises(NotImplementedError, match="\"pow\" not implemented for 'Bool'"):
        tg.tensor([True]) ** tg.tensor([True])


def test_zero_dim_tensor_does_not_raise_a_dimensioned_tensors_dtype():
    x = tg.ones(3, dtype=tg.float32)
    assert (x * tg.tensor(2.0)).dtype == tg.float32
    assert (x + tg.ones(2).sum()).dtype == tg.float32
    assert (tg.tensor([1.0, 2.0]).float() * tg.tensor([1.0, 2.0]).detach().sum()).dtype == tg.float32
    i = _t([1, 2], tg.int32)
    assert (i + tg.tensor(2)).dtype == tg.int32                    # same category: the tensor's dtype
    assert (i + tg.tensor(2.0)).dtype == tg.float64                # a higher category: the 0-d tensor's
    assert (i + tg.tensor(2.0, dtype=tg.float32)).dtype == tg.float32
    assert (tg.tensor([True]) + tg.tensor(2, dtype=tg.int32)).dtype == tg.int32
    assert (tg.tensor(2.0, dtype=tg.float32) * tg.tensor(3.0)).dtype == tg.float64     # both 0-d: promoted
    # Python numbers rank like 0-d tensors of their kind
    assert (i + 5).dtype == tg.int32 and (i + 2.5).dtype == tg.float64
    assert (x + 2.5).dtype == tg.float32
    r = tg.tensor([True, False]) + True
    assert r.dtype == tg.bool and r.tolist() == [True, True]
    assert (tg.tensor([True]) + 5).dtype == tg.int64
    # compared in the common dtype: float32(0.1) == 0-d float64 0.1
    assert (_t([0.1], tg.float32) == tg.tensor(0.1)).tolist() == [True]
    assert tg.where(tg.tensor([True, False]), _t([1, 2], tg.int32), 7).dtype == tg.int32


def test_zero_dim_promotion_gradients():
    x = tg.tensor([0.5, 1.5, 2.5], dtype=tg.float32, requires_grad=True)
    s = tg.tensor(3.0, requires_grad=True)
    y = x * s + s * s
    assert y.dtype == tg.float32 and y.tolist() == [10.5, 13.5, 16.5]
    y.sum().backward()
    assert x.grad.dtype == tg.float32 and x.grad.tolist() == [3.0, 3.0, 3.0]
    assert s.grad.dtype == tg.float64 and s.grad.item() == 4.5 + 18.0
    w = tg.tensor([1.5, 2.5], requires_grad=True)
    assert tg.autograd.gradcheck(
        lambda w: w * _t([1, 2], tg.int32) + w ** tg.tensor([2, 3]) + tg.tensor([1, 2]) / w
        + (tg.tensor([1, 3]) ** 2.0) * w + tg.clamp(w, min=tg.tensor(2)), (w,))


def test_integer_clamp():
    r = tg.tensor([1, 2, 3]).clamp(1, 2)
    assert r.dtype == tg.int64 and r.tolist() == [1, 2, 2]
    r = tg.tensor([0, 5]).clamp(min=1)
    assert r.dtype == tg.int64 and r.tolist() == [1, 5]
    r = _t([0, 5], tg.int32).clip(max=3)
    assert r.dtype == tg.int32 and r.tolist() == [0, 3]
    r = tg.tensor([0, 5]).clamp(min=0.5)
    assert r.dtype == tg.float64 and r.tolist() == [0.5, 5.0]
    r = tg.tensor([True, False]).clamp(0, True)
    assert r.dtype == tg.int64 and r.tolist() == [1, 0]
    with pytest.raises(NotImplementedError, match="\"clamp_scalar_cpu\" not implemented for 'Bool'"):
        tg.tensor([True]).clamp(True, True)
    with pytest.raises(RuntimeError, match="value cannot be converted to type int without overflow"):
        _t([1], tg.int32).clamp(2 ** 40)


@pytest.mark.parametrize("data, dtype", [
    (np.float32(1.5), "float32"), ([np.float32(1.5)], "float32"), ([1.5, np.float32(2.5)], "float64"),
    ([np.float32(1.5), 1.5], "float64"), (np.int32(3), "int32"), ([np.int32(3)], "int32"),
    ([np.int32(3), 2], "int64"), (np.float16(1), "float16"), (np.bool_(True), "bool"),
    ([np.bool_(True), np.bool_(False)], "bool"), ([np.int32(1), 2.5], "float64"), (np.uint8(3), "uint8"),
    ([np.int8(3), np.uint8(3)], "int16"), (np.array([1, 2], np.int32), "int32"),
    ([np.array([1.0, 2.0], np.float32)], "float32"), ([[np.float32(1)], [np.float32(2)]], "float32"),
    ([tg.tensor(1.0, dtype=tg.float32)], "float32"), ([1, 2], "int64"), ([1.5], "float64"), ([True], "bool"),
])
def test_tensor_keeps_numpy_dtypes(data, dtype):
    assert tg.tensor(data).dtype.name == dtype


def test_linspace_as_pytorch():
    assert tg.linspace(-1, 1, 5, dtype=tg.int64).tolist() == [-1, 0, 0, 0, 1]
    assert tg.linspace(0.5, 3.7, 5, dtype=tg.int64).tolist() == [0, 0, 1, 2, 3]      # bounds truncated too
    assert tg.linspace(-6, 8, 7, dtype=tg.int64).tolist() == [-6, -3, -1, 0, 3, 5, 8]
    assert tg.linspace(10, 0, 4, dtype=tg.int32).tolist() == [10, 6, 3, 0]
    assert tg.linspace(-10, -1, 4, dtype=tg.int64).dtype == tg.int64
    assert tg.linspace(0, 1, 1, dtype=tg.bool).tolist() == [False]
    with pytest.raises(NotImplementedError, match="\"linspace_cpu\" not implemented for 'Bool'"):
        tg.linspace(0, 1, 3, dtype=tg.bool)
    # float64: PyTorch's values to the bit (two halves, each rounded once)
    assert tg.linspace(0.0, 1.0, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    v = tg.linspace(-6.0, 8.0, 7).numpy()
    assert v[3] == 0.9999999999999996 and v[0] == -6.0 and v[-1] == 8.0     # (np.linspace: 1.0)


def test_linspace_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    for _ in range(300):
        start, end = rng.uniform(-50, 50, 2)
        steps = int(rng.integers(2, 60))
        assert np.array_equal(tg.linspace(start, end, steps).numpy(),
                              torch.linspace(start, end, steps, dtype=torch.float64).numpy())
        a, b = int(rng.integers(-20, 20)), int(rng.integers(-20, 20))
        assert tg.linspace(a, b, steps, dtype=tg.int64).tolist() == \
            torch.linspace(a, b, steps, dtype=torch.int64).tolist()


def test_int_tensor_ops():
    a = tg.tensor([1, 2, 3])
    for r, values in ((a * 2, [2, 4, 6]), (a + a, [2, 4, 6]), (a - 1, [0, 1, 2]), (a ** 2, [1, 4, 9]),
                      (-a, [-1, -2, -3]), (a.clamp(min=2), [2, 2, 3]), (abs(-a), [1, 2, 3])):
        assert r.dtype == tg.int64 and r.tolist() == values
    assert a.sum().dtype == tg.int64 and a.sum().item() == 6
    assert tg.tensor([True, True, False]).sum().dtype == tg.int64
    assert _t([1, 2], tg.int32).sum().dtype == tg.int64
    assert _t([1, 2], tg.int32).prod().dtype == tg.int64
    assert (a / 2).dtype == tg.float64 and (a / 2).tolist() == [0.5, 1.0, 1.5]
    with pytest.raises(RuntimeError, match="could not infer output dtype. Input dtype must be either a floating "
                                           "point or complex dtype. Got: Long"):
        a.mean()
    with pytest.raises(RuntimeError, match="Got: Int"):
        _t([1], tg.int32).mean()
    with pytest.raises(RuntimeError, match="std and var only support floating point and complex dtypes"):
        a.var()
    assert tg.logsumexp(a, 0).dtype == tg.float64
    assert math.isclose(tg.logsumexp(a, 0).item(), math.log(math.exp(1) + math.exp(2) + math.exp(3)))


def test_integer_overflow_wraps():
    r = _t([2 ** 30], tg.int32) * 4
    assert r.dtype == tg.int32 and r.tolist() == [0]
    assert (_t([2 ** 31 - 1], tg.int32) + _t([1], tg.int32)).tolist() == [-2 ** 31]
    assert (tg.tensor([2 ** 62]) * tg.tensor(4)).tolist() == [0]


def test_bool_refusals():
    b = tg.tensor([True, False])
    with pytest.raises(RuntimeError, match="with two bool tensors is not supported"):
        b - b
    with pytest.raises(RuntimeError, match="with a bool tensor is not supported"):
        tg.tensor([1, 2]) - b
    with pytest.raises(RuntimeError, match="with a bool tensor is not supported"):
        tg.tensor([1.0, 2.0]) - True
    with pytest.raises(RuntimeError, match="with a bool tensor is not supported"):
        1.5 - b
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor is not supported"):
        -b
    with pytest.raises(RuntimeError, match=r"argmax\(\): does not support bool input"):
        b.argmax()
    assert tg.sign(b).dtype == tg.bool and tg.sign(b).tolist() == [True, False]
    assert tg.exp(b).dtype == tg.float64 and tg.exp(b).tolist() == [math.e, 1.0]


def test_add_alpha():
    b = tg.tensor([True, False])
    r = tg.add(b, b, alpha=2)
    assert r.dtype == tg.bool and r.tolist() == [True, False]
    r = tg.add(_t([1, 2], tg.int32), b, alpha=2)
    assert r.dtype == tg.int32 and r.tolist() == [3, 2]
    r = tg.add(_t([1.0, 2.0], tg.float32), tg.tensor([1, 2]), alpha=2.5)
    assert r.dtype == tg.float32 and r.tolist() == [3.5, 7.0]
    with pytest.raises(RuntimeError, match="For integral input tensors, argument alpha must not be a floating"):
        tg.add(tg.tensor([1]), tg.tensor([1]), alpha=1.5)
    with pytest.raises(RuntimeError, match="Boolean alpha only supported for Boolean results."):
        tg.add(tg.tensor([1.0]), tg.tensor([1.0]), alpha=True)


def test_cat_promotes_as_pytorch():
    r = tg.cat([_t([1, 2], tg.int64), _t([0.5], tg.float32)])
    assert r.dtype == tg.float32 and r.tolist() == [1.0, 2.0, 0.5]
    assert tg.stack([tg.tensor(1, dtype=tg.int32), tg.tensor(0.5, dtype=tg.float32)]).dtype == tg.float32


def test_numpy_scalars_read_as_python_numbers():
    x = _t([1.0, 2.0], tg.float32)
    for r in (x * np.float64(2.0), np.float64(2.0) * x, x + np.float32(1.0)):
        assert r.dtype == tg.float32
    assert (_t([1, 2], tg.int32) + np.int64(2)).dtype == tg.int32
    assert (_t([1, 2], tg.int32) * np.float32(2.0)).dtype == tg.float64
    r = tg.tensor([True]) + np.bool_(True)         # PyTorch reads a NumPy bool as a float
    assert r.dtype == tg.float64 and r.tolist() == [2.0]


def test_python_int_beyond_the_range_wraps():
    i = _t([1, 2], tg.int32)
    assert (i + 2 ** 40).tolist() == [1, 2] and (i + 2 ** 40).dtype == tg.int32
    assert (i * 2 ** 31).tolist() == [-2 ** 31, 0]
    assert (2 ** 40 - _t([1], tg.int32)).tolist() == [-1]
    assert (tg.tensor([1]) + 2 ** 63).tolist() == [1 - 2 ** 63]
    assert (i > 2 ** 40).tolist() == [True, True]         # 2**40 is 0 as an int32
    assert (tg.tensor([1]) > 2 ** 40).tolist() == [False]


def test_matrix_products_do_not_promote():
    f32, f64 = tg.ones(2, dtype=tg.float32), tg.ones(2)
    with pytest.raises(RuntimeError, match="dot : expected both vectors to have same dtype, but found Float and Double"):
        f32 @ f64
    with pytest.raises(RuntimeError, match="addmv input tensors must have the same dtype, but got Double, Float, "
                                           "and Double"):
        tg.ones(2, 2, dtype=tg.float32) @ f64
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but got: long int != double"):
        tg.ones(2, 2, dtype=tg.int64) @ tg.ones(2, 2)
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        tg.ones(3, 2, 2, dtype=tg.float32) @ tg.ones(3, 2, 2)
    with pytest.raises(NotImplementedError, match="\"addmm_impl_cpu_\" not implemented for 'Bool'"):
        tg.ones(2, 2, dtype=tg.bool) @ tg.ones(2, 2, dtype=tg.bool)
    r = tg.tensor([[1, 2]]) @ tg.tensor([[3], [4]])
    assert r.dtype == tg.int64 and r.tolist() == [[11]]


def test_where_condition_must_be_bool():
    with pytest.raises(RuntimeError, match="where expected condition to be a boolean tensor, but got a tensor with "
                                           "dtype Long"):
        tg.where(tg.tensor([1, 0]), tg.tensor([1.0, 2.0]), 0.0)


def test_linear_does_not_promote():
    F = tg.nn.functional
    x32, w32 = tg.ones(3, 2, dtype=tg.float32), tg.ones(4, 2, dtype=tg.float32)
    assert F.linear(x32, w32, tg.ones(4, dtype=tg.float32)).dtype == tg.float32
    with pytest.raises(RuntimeError, match="self and mat2 must have the same dtype, but got Double and Float"):
        F.linear(x32, w32, tg.ones(4))
    with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype, but got Float and Double"):
        F.linear(x32, tg.ones(4, 2), tg.ones(4))
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but got: float != double"):
        tg.nn.Linear(2, 4, bias=False)(x32)
