"""The recorders' single-number path: one-element float64 operands computed as
Python floats (``NumberTensor``), with the ndarray made only when read."""
import threading
import warnings

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.ops.elementwise import NUMBER_FORWARD
from tapegrad.core.tensor import NumberTensor



def _chain(y0, w, steps=20):
    y = y0
    for _ in range(steps):
        y = y.sin() * w + y.cos() * 0.5
    return y


def _numpy_chain(y0, w, steps=20):
    """The same chain and its gradient by hand, with NumPy on one-element arrays."""
    ys = [np.array([y0])]
    for _ in range(steps):
        y = ys[-1]
        ys.append(np.sin(y) * w + np.cos(y) * 0.5)
    gy, gw = np.ones(1), np.zeros(1)
    for y in reversed(ys[:-1]):
        gw = gw + gy * np.sin(y)
        gy = gy * (np.cos(y) * w - np.sin(y) * 0.5)
    return ys[-1], gy, gw


def test_chain_outputs_are_numbers_with_numpys_values_and_gradients():
    y0 = tg.tensor([0.3], requires_grad=True)
    w = tg.tensor([0.7], requires_grad=True)
    y = _chain(y0, w)
    assert type(y) is NumberTensor and y._f is not None
    val, gy, gw = _numpy_chain(0.3, 0.7)
    assert y.shape == (1,) and y.dtype == np.float64
    y.sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), val)      # sin, cos, * and + are NumPy's to the bit
    np.testing.assert_allclose(y0.grad.numpy(), gy, rtol=1e-13)
    np.testing.assert_allclose(w.grad.numpy(), gw, rtol=1e-13)


def test_number_path_gives_the_array_paths_values_and_gradients():
    """Each op on a one-element tensor against the same op on a two-element one
    (the NumPy path), value and gradient."""
    rng = np.random.default_rng(1)
    unary = {name: f for name, f in [
        ("neg", lambda x: -x), ("abs", tg.abs), ("sqrt", tg.sqrt), ("sin", tg.sin), ("cos", tg.cos),
        ("add_s", lambda x: x + 1.25), ("mul_s", lambda x: x * -3.5), ("div_s", lambda x: x / 7.0),
        ("rsub_s", lambda x: 2.0 - x), ("rdiv_s", lambda x: 3.0 / x), ("reciprocal", tg.reciprocal)]}
    binary = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
              "div": lambda a, b: a / b}
    assert set(unary) | set(binary) == set(NUMBER_FORWARD)
    for name, f in unary.items():
        v = float(rng.uniform(0.2, 2.0))
        x1 = tg.tensor([v], requires_grad=True)
        x2 = tg.tensor([v, v], requires_grad=True)
        y1 = f(x1 * 1.0)            # (an entry's output: a NumberTensor in, so both kinds of input run)
        y2 = f(x2 * 1.0)
        assert type(y1) is NumberTensor, name
        y1.sum().backward()
        y2.sum().backward()
        assert y1.item() == y2.detach().numpy()[0], name
        assert x1.grad.numpy()[0] == x2.grad.numpy()[0], name
        assert y1.grad_fn.name() == y2.grad_fn.name(), name
    for name, f in binary.items():
        u, v = rng.uniform(0.2, 2.0, 2)
        a1, b1 = tg.tensor([u], requires_grad=True), tg.tensor([v], requires_grad=True)
        a2, b2 = tg.tensor([u, u], requires_grad=True), tg.tensor([v, v], requires_grad=True)
        y1, y2 = f(a1, b1), f(a2, b2)
        assert type(y1) is NumberTensor, name
        y1.sum().backward()
        y2.sum().backward()
        assert y1.item() == y2.detach().numpy()[0], name
        assert a1.grad.numpy()[0] == a2.grad.numpy()[0] and b1.grad.numpy()[0] == b2.grad.numpy()[0], name


def test_gradcheck_through_numbers():
    x = tg.tensor([0.4], requires_grad=True)
    assert tg.autograd.gradcheck(lambda x: (x.sin() * x + x.cos() / 3.0 + 2.0 / x).sqrt() * 1.5 - x, (x,))


def test_an_operand_python_refuses_takes_the_numpy_path():
    """1/0, sqrt(-1), sin(inf): NumPy's inf/nan (and the NumPy path's gradient)."""
    x = tg.tensor([0.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        y = 1.0 / (x * 1.0)
        assert type(y) is not NumberTensor and y.item() == np.inf
        y.sum().backward()
        assert x.grad.item() == -np.inf
        assert np.isnan(tg.sqrt(tg.tensor([-1.0], requires_grad=True) * 1.0).item())
        assert np.isnan(tg.sin(tg.tensor([np.inf], requires_grad=True) * 1.0).item())


def test_data_is_made_once_and_in_place_changes_are_seen():
    x = tg.tensor([0.5], requires_grad=True)
    y = x * 2.0
    assert type(y) is NumberTensor and y._f == 1.0
    d = y._data
    assert y._f is None and y._data is d and d.shape == (1,) and d.dtype == np.float64
    with tg.no_grad():
        y.add_(1.0)                 # in place, through the array
    assert y.item() == 2.0 and y._data is d
    z = y.sin()                     # (the array path now: the float is gone)
    assert z.item() == np.sin(2.0)


def test_zero_dimensional_numbers_keep_their_shape():
    x = tg.tensor(0.5, requires_grad=True)
    y = x.cos() * x
    assert type(y) is NumberTensor and y.shape == () and y.ndim == 0
    assert y.detach().numpy().shape == ()
    y.backward()
    assert x.grad.item() == pytest.approx(-np.sin(0.5) * 0.5 + np.cos(0.5), rel=1e-15)
    assert x.grad.shape == ()


def test_a_saved_number_changed_in_place_is_refused_at_backward():
    x = tg.tensor([0.5], requires_grad=True)
    y = x * 1.0
    z = y.sin()                     # saves y
    with tg.no_grad():
        y.mul_(3.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_no_grad_records_nothing_and_makes_arrays():
    x = tg.tensor([0.5], requires_grad=True)
    with tg.no_grad():
        y = x.sin() * 2.0
    assert type(y) is not NumberTensor and not y.requires_grad and y._tape is None
    assert y.item() == np.sin(0.5) * 2.0


def test_numbers_recorded_for_replay_take_the_numpy_path():
    f = tg.compile(lambda y, w: _chain(y, w, 5).sum())
    w = tg.tensor([0.7], requires_grad=True)
    for v in (0.3, 0.9, 0.3):
        w.grad = None
        f(tg.tensor([v]), w).backward()
        g = w.grad.item()
        w.grad = None
        _chain(tg.tensor([v]), w, 5).sum().backward()
        assert g == pytest.approx(w.grad.item(), rel=1e-14)


def test_threads_reading_one_number_get_one_array():
    x = tg.tensor([0.5], requires_grad=True)
    for _ in range(20):
        y = x * 3.0
        got = []
        barrier = threading.Barrier(4)

        def read():
            barrier.wait()
            got.append(y._data)
        threads = [threading.Thread(target=read) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(a is got[0] for a in got) and got[0] is y._data


def test_create_graph_through_numbers():
    x = tg.tensor([0.7], requires_grad=True)
    y = x.sin() * x * x
    g, = tg.autograd.grad(y, x, create_graph=True)
    h, = tg.autograd.grad(g, x)
    v = 0.7
    assert g.item() == pytest.approx(np.cos(v) * v * v + 2 * v * np.sin(v), rel=1e-14)
    assert h.item() == pytest.approx(-np.sin(v) * v * v + 4 * v * np.cos(v) + 2 * np.sin(v), rel=1e-14)
