"""tg.nn.utils: clip_grad_norm_, clip_grad_value_, get_total_norm, parameters_to_vector,
vector_to_parameters and rnn.pad_sequence / unpad_sequence, against PyTorch's values
and finite differences; packing refused clearly."""
import warnings

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.nn.utils import (clip_grad_norm, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_,
                               get_total_norm, parameters_to_vector, vector_to_parameters)
from tapegrad.nn.utils import rnn


def _params(lib, grads, dtypes=None):
    out = []
    for i, g in enumerate(grads):
        dt = None if dtypes is None else dtypes[i]
        p = lib.zeros(np.shape(g), requires_grad=True, dtype=dt) if g is not None else lib.zeros(2, requires_grad=True)
        if g is not None:
            p.grad = lib.tensor(np.asarray(g), dtype=dt)
        out.append(p)
    return out


GRADS = [[[3.0, -4.0], [0.5, 1.5]], None, [12.0, -0.25, 0.0]]


def test_clip_grad_norm_literal():
    ps = _params(tg, GRADS)
    total = clip_grad_norm_(ps, max_norm=2.0)
    expected_total = np.sqrt(9 + 16 + 0.25 + 2.25 + 144 + 0.0625)
    assert isinstance(total, tg.Tensor) and total.ndim == 0 and total.dtype == tg.float64
    assert total.item() == pytest.approx(expected_total, rel=1e-15)
    coef = 2.0 / (expected_total + 1e-6)
    np.testing.assert_allclose(ps[0].grad._data, np.array(GRADS[0]) * coef, rtol=1e-15)
    np.testing.assert_allclose(ps[2].grad._data, np.array(GRADS[2]) * coef, rtol=1e-15)
    assert ps[1].grad is None
    # a total below max_norm: the gradients are not scaled up
    ps = _params(tg, [[0.3, 0.4]])
    assert clip_grad_norm_(ps[0], 10.0).item() == pytest.approx(0.5, rel=1e-15)
    np.testing.assert_array_equal(ps[0].grad._data, [0.3, 0.4])


@pytest.mark.parametrize("norm_type", [2.0, 1, float("inf"), -float("inf"), 0.5, 3, 0])
def test_clip_grad_norm_against_torch(norm_type):
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float64)
    r = np.random.default_rng(3)
    grads = [r.standard_normal((3, 4)), None, r.standard_normal(5) * 10]
    ps, tps = _params(tg, grads), _params(torch, grads)
    total = clip_grad_norm_(ps, 1.5, norm_type=norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(tps, 1.5, norm_type=norm_type)
    np.testing.assert_allclose(total.item(), ttotal.item(), rtol=1e-14)
    for p, tp in zip(ps, tps):
        if p.grad is None:
            assert tp.grad is None
        else:
            np.testing.assert_allclose(p.grad._data, tp.grad.numpy(), rtol=1e-14, atol=1e-16)
    assert total.dtype == tg.float64 and ttotal.dtype == torch.float64


def test_clip_grad_norm_mixed_dtypes_and_nonfinite():
    ps = _params(tg, [[3.0, 4.0], [0.0, 12.0]], dtypes=[tg.float32, tg.float64])
    total = clip_grad_norm_(ps, 1.0)
    assert total.item() == pytest.approx(13.0)
    assert ps[0].grad.dtype == tg.float32 and ps[1].grad.dtype == tg.float64
    np.testing.assert_allclose(ps[1].grad._data, [0.0, 12.0 / (13.0 + 1e-6)], rtol=1e-15)
    ps = _params(tg, [[np.inf, 1.0]])
    with pytest.raises(RuntimeError) as e:
        clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    assert str(e.value) == ("The total norm of order 2.0 for gradients from `parameters` is non-finite, so it "
                            "cannot be clipped. To disable this error and scale the gradients by the non-finite "
                            "norm anyway, set `error_if_nonfinite=False`")
    assert np.isinf(clip_grad_norm_(ps, 1.0).item())      # (scaled by 1/inf: PyTorch's nan and zeros)
    np.testing.assert_array_equal(ps[0].grad._data, [np.nan, 0.0])


def test_clip_grad_norm_edge_cases():
    assert clip_grad_norm_([tg.zeros(2, requires_grad=True)], 1.0).item() == 0.0      # no gradients
    with pytest.warns(UserWarning, match="^`parameters` is an empty generator, no gradient clipping will occur.$"):
        assert clip_grad_norm_((p for p in []), 1.0).item() == 0.0
    ps = _params(tg, [[3.0, 4.0]])
    with pytest.warns(FutureWarning, match="clip_grad_norm` is now deprecated in favor of"):
        assert clip_grad_norm(ps, 1.0).item() == 5.0
    # the two halves PyTorch exposes
    ps = _params(tg, [[3.0, 4.0], [12.0]])
    total = get_total_norm([p.grad for p in ps])
    assert total.item() == 13.0
    clip_grads_with_norm_(ps, 6.5, total)
    np.testing.assert_allclose(ps[0].grad._data, [1.5, 2.0], rtol=1e-6)
    # the gradients are scaled in place: their version moves, the parameters' does not
    p = _params(tg, [[3.0, 4.0]])[0]
    g, gv, pv = p.grad, p.grad._version, p._version
    clip_grad_norm_(p, 1.0, foreach=True)
    assert p.grad is g and g._version > gv and p._version == pv


def test_clip_grad_value():
    ps = _params(tg, [[3.0, -4.0, 0.5], None])
    assert clip_grad_value_(ps, 1.0) is None
    np.testing.assert_array_equal(ps[0].grad._data, [1.0, -1.0, 0.5])
    assert ps[1].grad is None
    p = _params(tg, [[-2.0, 2.0]])[0]
    clip_grad_value_(p, 0.5, foreach=False)
    np.testing.assert_array_equal(p.grad._data, [-0.5, 0.5])
    try:
        import torch
    except ImportError:
        return
    torch.set_default_dtype(torch.float64)
    grads = [np.random.default_rng(4).standard_normal((4, 3)) * 3]
    ps, tps = _params(tg, grads), _params(torch, grads)
    clip_grad_value_(ps, 1.25)
    torch.nn.utils.clip_grad_value_(tps, 1.25)
    np.testing.assert_array_equal(ps[0].grad._data, tps[0].grad.numpy())


def test_parameters_to_vector_and_back():
    model = tg.nn.Sequential(tg.nn.Linear(3, 2), tg.nn.Linear(2, 1))
    vec = parameters_to_vector(model.parameters())
    assert vec.shape == (11,) and vec.requires_grad
    expected = np.concatenate([p.detach().numpy().reshape(-1) for p in model.parameters()])
    np.testing.assert_array_equal(vec._data, expected)
    # gradients flow back to the parameters
    (vec * tg.arange(11.0)).sum().backward()
    offset = 0
    for p in model.parameters():
        n = p.numel()
        np.testing.assert_array_equal(p.grad._data.reshape(-1), np.arange(offset, offset + n, dtype=float))
        offset += n
    # and back: each parameter becomes a view of the vector
    new = tg.arange(11.0) / 10
    vector_to_parameters(new, model.parameters())
    np.testing.assert_array_equal(model[0].weight._data, (np.arange(6.0) / 10).reshape(2, 3))
    np.testing.assert_array_equal(model[1].bias._data, [1.0])
    assert model[0].weight.requires_grad and model[0].weight.is_leaf
    with tg.no_grad():
        new[0] = 5.0
    assert model[0].weight[0, 0].item() == 5.0        # (shares the vector's storage, as in PyTorch)
    with pytest.raises(TypeError, match="^expected torch.Tensor, but got: list$"):
        vector_to_parameters([1.0], model.parameters())


def test_parameters_to_vector_gradcheck():
    a = tg.tensor(np.random.default_rng(5).standard_normal((2, 3)), requires_grad=True)
    b = tg.tensor(np.random.default_rng(6).standard_normal(4), requires_grad=True)
    assert tg.autograd.gradcheck(lambda a, b: parameters_to_vector([a, b]) ** 2, (a, b))


def test_pad_sequence_literal():
    a, b, c = tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0, 5.0]), tg.tensor([6.0])
    out = rnn.pad_sequence([a, b, c])
    assert out.shape == (3, 3)
    np.testing.assert_array_equal(out._data, [[1, 3, 6], [2, 4, 0], [0, 5, 0]])
    out = rnn.pad_sequence([a, b, c], batch_first=True, padding_value=-1.0, padding_side="left")
    np.testing.assert_array_equal(out._data, [[-1, 1, 2], [3, 4, 5], [-1, -1, 6]])
    # trailing dimensions, the first tensor's dtype, a tensor as the sequence of its rows
    x = rnn.pad_sequence([tg.ones((1, 2), dtype=tg.int64), tg.zeros((2, 2))], batch_first=True)
    assert x.dtype == tg.int64 and x.shape == (2, 2, 2)
    assert rnn.pad_sequence(tg.ones((2, 3))).shape == (3, 2)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence_against_torch(batch_first, side):
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(7)
    arrays = [r.standard_normal((n, 2, 3)) for n in (4, 1, 6, 6)]
    got = rnn.pad_sequence([tg.tensor(a) for a in arrays], batch_first=batch_first, padding_value=0.5,
                           padding_side=side)
    want = torch.nn.utils.rnn.pad_sequence([torch.tensor(a) for a in arrays], batch_first=batch_first,
                                           padding_value=0.5, padding_side=side)
    np.testing.assert_array_equal(got._data, want.numpy())


def test_pad_sequence_gradients_and_unpad():
    r = np.random.default_rng(8)
    xs = [tg.tensor(r.standard_normal((n, 2)), requires_grad=True) for n in (3, 1, 2)]
    assert tg.autograd.gradcheck(lambda *xs: rnn.pad_sequence(list(xs), batch_first=True) ** 2, xs)
    padded = rnn.pad_sequence(xs)
    back = rnn.unpad_sequence(padded, tg.tensor([3, 1, 2]))
    for x, y in zip(xs, back):
        np.testing.assert_array_equal(x._data, y._data)
    back = rnn.unpad_sequence(rnn.pad_sequence(xs, batch_first=True), [3, 1, 2], batch_first=True)
    assert [y.shape for y in back] == [(3, 2), (1, 2), (2, 2)]


def test_pad_sequence_errors():
    with pytest.raises(RuntimeError, match="^received an empty list of sequences$"):
        rnn.pad_sequence([])
    with pytest.raises(RuntimeError, match="^Expected padding_side to be one of left or right, but got middle.$"):
        rnn.pad_sequence([tg.ones(2)], padding_side="middle")
    with pytest.raises(RuntimeError, match=r"^The size of tensor a \(3\) must match the size of tensor b \(4\) at "
                                           r"non-singleton dimension 1$"):
        rnn.pad_sequence([tg.ones((2, 3)), tg.ones((1, 4))])


@pytest.mark.parametrize("call", [
    lambda: rnn.pack_padded_sequence(tg.ones((3, 2)), [3, 2]),
    lambda: rnn.pad_packed_sequence(None),
    lambda: rnn.pack_sequence([tg.ones(2)]),
    lambda: rnn.unpack_sequence(None),
    lambda: rnn.PackedSequence(tg.ones(2), tg.ones(1)),
])
def test_packing_is_refused_clearly(call):
    with pytest.raises(NotImplementedError, match="tapegrad has no PackedSequence.*pad_sequence"):
        call()


def test_clip_in_a_training_step():
    """The usual loop: backward, clip, step."""
    tg.manual_seed(0)
    model = tg.nn.Linear(4, 1)
    opt = tg.optim.SGD(model.parameters(), lr=0.1)
    x, y = tg.randn(8, 4), tg.randn(8, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        norm = clip_grad_norm_(model.parameters(), 0.01)
        opt.step()
    assert norm.item() > 0.01
    assert np.sqrt(sum((p.grad._data ** 2).sum() for p in model.parameters())) == pytest.approx(0.01, rel=1e-4)
