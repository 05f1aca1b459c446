"""Tensor's methods come from one class-body table (functions._TensorMethods), and
nn/optim change a tensor's array through the documented ``_write_``/``_written_``."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.functions import _TensorMethods, _CLASS_BODY_NAMES


def test_every_table_entry_is_the_tensor_attribute():
    names = [n for n in vars(_TensorMethods) if n not in _CLASS_BODY_NAMES]
    assert len(names) > 100
    for n in names:
        assert getattr(tg.Tensor, n) is vars(_TensorMethods)[n], n
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    assert y.grad_fn.name() == "MulBackward0"
    np.testing.assert_array_equal(y.detach().numpy(), [1.0, 4.0])


def test_tensor_stays_hashable_by_identity():
    a, b = tg.ones(2), tg.ones(2)
    assert hash(a) != hash(b) or a is b
    assert len({a, b, a}) == 2
    assert {a: 1}[a] == 1


def test_written_bumps_the_version_and_backward_notices():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    x = tg.tensor([3.0, 4.0], requires_grad=True)
    y = (w * x).sum()           # saves w for x's gradient
    v = w._version
    with tg.no_grad():
        w._data[...] = [5.0, 6.0]
    w._written_()
    assert w._version == v + 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_write_copies_casts_and_bumps():
    w = tg.zeros(3)
    v = w._version
    w._write_(np.array([1, 2, 3]))
    assert w.dtype == tg.float64 and w._version == v + 1
    np.testing.assert_array_equal(w.numpy(), [1.0, 2.0, 3.0])
    # a fresh graph after the write sees the new values
    w.requires_grad_(True)
    (w * w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0, 6.0])
