"""clamp with tensor bounds: PyTorch's min(max(x, min), max), so hi where min > max and NaN
where the input or a bound is NaN (these gave x), and the gradient by PyTorch's masks;
eager, replayed, and against PyTorch."""
import itertools

import numpy as np
import pytest

import tapegrad as tg

nan = float("nan")
VALUES = [nan, -1.0, 0.0, 0.5, 1.0, 2.0]
XS, LOS, HIS = map(np.array, zip(*itertools.product(VALUES, VALUES, VALUES)))


def _want(x, lo, hi):
    """PyTorch's value and masks (x's, lo's, hi's gradient for a gradient of 1), with the
    one tie where tapegrad's lo takes the gradient PyTorch gives nobody (x < lo == hi)."""
    with np.errstate(invalid="ignore"):
        value = np.minimum(np.maximum(x, lo), hi)
        gx = ((x >= lo) & (x <= hi)).astype(float)
        glo = (((x < lo) & (lo < hi)) | ((x < lo) & (lo == hi))).astype(float)
        ghi = ((x > hi) | (hi < lo)).astype(float)
    return value, gx, glo, ghi


def _clamp(x, lo, hi, **kw):
    x, lo, hi = (tg.tensor(a, requires_grad=True) for a in (x, lo, hi))
    y = tg.clamp(x, lo, hi, **kw) if not kw else tg.clamp(x, **{k: {"lo": lo, "hi": hi}[v] for k, v in kw.items()})
    y.sum().backward()
    return y.detach().numpy(), x.grad.numpy(), lo.grad, hi.grad


def test_values_and_gradients_on_a_grid():
    value, gx, glo, ghi = _clamp(XS, LOS, HIS)
    want = _want(XS, LOS, HIS)
    np.testing.assert_array_equal(value, want[0])       # (NaNs in the same places)
    np.testing.assert_array_equal(gx, want[1])
    np.testing.assert_array_equal(glo.numpy(), want[2])
    np.testing.assert_array_equal(ghi.numpy(), want[3])
    # the cases that gave x: a NaN bound, and min > max
    got, *_ = _clamp([1.0, 1.0, 1.0, -1.0, 5.0], [nan, 0.0, 0.0, 0.0, 3.0], [2.0, nan, -1.0, -1.0, 2.0])
    np.testing.assert_array_equal(got, [nan, nan, -1.0, -1.0, 2.0])


def test_one_bound():
    x, b = np.array([nan, -1.0, 0.5, 2.0, 1.0]), np.array([0.0, nan, 0.5, 1.0, nan])
    y, gx, glo, _ = _clamp(x, b, b, min="lo")
    np.testing.assert_array_equal(y, [nan, nan, 0.5, 2.0, nan])
    np.testing.assert_array_equal(gx, [0.0, 0.0, 1.0, 1.0, 0.0])
    np.testing.assert_array_equal(glo.numpy(), [0.0, 0.0, 0.0, 0.0, 0.0])
    y, gx, _, ghi = _clamp(x, b, b, max="hi")
    np.testing.assert_array_equal(y, [nan, nan, 0.5, 1.0, nan])
    np.testing.assert_array_equal(gx, [0.0, 0.0, 1.0, 0.0, 0.0])
    np.testing.assert_array_equal(ghi.numpy(), [0.0, 0.0, 0.0, 1.0, 0.0])


def test_replayed_with_nan_and_crossed_bounds():
    """The masks are comparisons a replay makes again: a recording at ordinary bounds
    replays NaN bounds and min > max as eager execution gives them."""
    step = tg.compile(lambda x, lo, hi: tg.clamp(x, min=lo, max=hi) * 1.0)
    for xs, los, his in (([0.5, -2.0, 3.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]),
                         ([0.5, 1.0, 5.0], [nan, 2.0, 3.0], [1.0, 1.0, 2.0]),
                         ([nan, 0.5, 0.5], [0.0, 0.0, 0.0], [1.0, nan, 1.0])):
        x, lo, hi = (tg.tensor(a, requires_grad=True) for a in (xs, los, his))
        y = step(x, lo, hi)
        y.sum().backward()
        want = _want(np.array(xs), np.array(los), np.array(his))
        np.testing.assert_array_equal(y.detach().numpy(), want[0])
        for t, w in zip((x, lo, hi), want[1:]):
            np.testing.assert_array_equal(t.grad.numpy(), w)
    assert step.stats.recordings == 1 and step.stats.replays == 2


def test_against_pytorch():
    torch = pytest.importorskip("torch")
    ts = [torch.tensor(a, requires_grad=True) for a in (XS, LOS, HIS)]
    y = torch.clamp(*ts)
    y.sum().backward()
    value, gx, glo, ghi = _clamp(XS, LOS, HIS)
    np.testing.assert_array_equal(value, y.detach().numpy())
    np.testing.assert_array_equal(gx, ts[0].grad.numpy())
    np.testing.assert_array_equal(ghi.numpy(), ts[2].grad.numpy())
    # lo's: PyTorch's but at the tie _want describes
    tie = (XS < LOS) & (LOS == HIS)
    np.testing.assert_array_equal(glo.numpy()[~tie], ts[1].grad.numpy()[~tie])
    assert tie.sum() == 10 and (glo.numpy()[tie] == 1.0).all()
