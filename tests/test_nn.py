"""tg.nn: Parameter, Module, Linear, Sequential, activations and the functional losses."""
import copy
import math
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn, optim
from tapegrad.nn import functional as F


# ----------------------------------------------------------------------------
# Parameter
# ----------------------------------------------------------------------------
def test_parameter_basics():
    t = tg.tensor([1.0, 2.0])
    p = nn.Parameter(t)
    assert isinstance(p, nn.Parameter) and isinstance(p, tg.Tensor)
    assert p.is_leaf and p.requires_grad and p.grad is None and p.dtype == np.float64
    assert p._data is t._data                       # shares the values
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    assert str(p) == repr(p)
    q = nn.Parameter(tg.tensor([1.0]), requires_grad=False)
    assert not q.requires_grad
    assert nn.Parameter([1.0, 2.0]).dtype == np.float64
    assert nn.Parameter().shape == (0,)
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(tg.tensor([1, 2], dtype=tg.int64))
    assert not nn.Parameter(tg.tensor([1, 2], dtype=tg.int64), requires_grad=False).requires_grad
    assert nn.Parameter(np.zeros(2, np.float32)).dtype == np.float32
    assert not isinstance(tg.tensor([1.0], requires_grad=True), nn.Parameter)


def test_parameter_in_operations():
    p = nn.Parameter(tg.tensor([[1.0, 2.0], [3.0, 4.0]]))
    x = tg.tensor([[0.5, -1.0], [2.0, 1.0]])
    outs = [p + x, x + p, p * x, x * p, p - 1, 2 * p, p / 2, p @ x, x @ p, p ** 2, -p, p.T, p[0], p.sum(),
            p.exp(), tg.maximum(p, x), p.relu(), p.tanh(), p + p]
    for o in outs:
        assert type(o) is tg.Tensor and o.requires_grad and not o.is_leaf
    np.testing.assert_allclose((p @ x)._data, p._data @ x._data)
    loss = ((p * x).sum() + (p @ x).sum() + (p + p).sum())
    loss.backward()
    expected = x._data + np.ones((2, 2)) @ x._data.T + 2
    np.testing.assert_allclose(p.grad._data, expected)
    assert type(p.grad) is tg.Tensor


def test_parameter_copy_and_pickle():
    p = nn.Parameter(tg.tensor([1.0, 2.0]))
    c = copy.deepcopy(p)
    assert type(c) is nn.Parameter and c.requires_grad and c._data is not p._data
    np.testing.assert_array_equal(c._data, p._data)
    u = pickle.loads(pickle.dumps(p))
    assert type(u) is nn.Parameter and u.requires_grad
    np.testing.assert_array_equal(u._data, p._data)


# ----------------------------------------------------------------------------
# Module
# ----------------------------------------------------------------------------
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 5)
        self.scale = nn.Parameter(tg.tensor([2.0]))
        self.act = nn.Tanh()
        self.fc2 = nn.Linear(5, 2)
        self.register_buffer("running", tg.zeros(2))
        self.not_registered = tg.tensor([1.0])           # a plain tensor attribute

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x) * self.scale)) + self.running


def test_module_registration_order_and_traversal():
    tg.manual_seed(0)
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"] or \
        names == ["fc1.weight", "fc1.bias", "scale", "fc2.weight", "fc2.bias"]
    # PyTorch: the module's own parameters first, then the children's, in registration order
    assert names == ["scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [id(p) for p in net.parameters()] == [id(p) for _, p in net.named_parameters()]
    assert [p.shape for p in net.parameters(recurse=False)] == [(1,)]
    assert list(net.children()) == [net.fc1, net.act, net.fc2]
    assert [n for n, _ in net.named_children()] == ["fc1", "act", "fc2"]
    assert [n for n, _ in net.named_modules()] == ["", "fc1", "act", "fc2"]
    assert [n for n, _ in net.named_buffers()] == ["running"]
    assert "not_registered" not in dict(net.named_parameters())
    # reassigning a parameter keeps its place; deleting removes it
    net.scale = nn.Parameter(tg.tensor([3.0]))
    assert [n for n, _ in net.named_parameters()][0] == "scale"
    del net.scale
    assert "scale" not in dict(net.named_parameters())
    with pytest.raises(AttributeError, match="'Net' object has no attribute 'scale'"):
        net.scale
    # shared parameters appear once
    seq = nn.Sequential(net.fc1, net.fc1)
    assert len(list(seq.parameters())) == 2


def test_module_setattr_errors():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="cannot assign 'tapegrad.DoubleTensor' as parameter 'weight'"):
        m.weight = tg.tensor([[1.0]])
    m.bias = None
    assert m.bias is None and [n for n, _ in m.named_parameters()] == ["weight"]

    class Bad(nn.Module):
        def __init__(self):
            self.p = nn.Parameter(tg.tensor([1.0]))

    with pytest.raises(AttributeError, match="cannot assign parameters before Module.__init__"):
        Bad()
    with pytest.raises(TypeError, match="cannot assign 'tapegrad.DoubleTensor' object to parameter 'w2'"):
        m.register_parameter("w2", nn.Parameter(tg.tensor([1.0])) * 2)


def test_train_eval_propagate():
    net = Net()
    assert net.training and net.fc1.training
    assert net.eval() is net
    assert not net.training and not net.fc1.training and not net.act.training
    net.train()
    assert all(m.training for m in net.modules())


def test_module_zero_grad():
    net = Net()
    net(tg.randn(4, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    grads = [p.grad for p in net.parameters()]
    net.zero_grad(set_to_none=False)
    assert all(p.grad is g and not g._data.any() for p, g in zip(net.parameters(), grads))
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_module_state_dict_round_trip():
    tg.manual_seed(1)
    a = Net()
    tg.manual_seed(2)
    b = Net()
    sd = a.state_dict()
    assert list(sd) == ["scale", "running", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert all(type(v) is tg.Tensor and not v.requires_grad for v in sd.values())
    assert sd["fc1.weight"]._data is a.fc1.weight._data            # shares storage, like PyTorch
    kv = a.state_dict(keep_vars=True)
    assert kv["fc1.weight"] is a.fc1.weight
    x = tg.randn(4, 3)
    assert not np.allclose(a(x)._data, b(x)._data)
    w_arr = b.fc1.weight._data
    res = b.load_state_dict(copy.deepcopy(sd))
    assert res.missing_keys == [] and res.unexpected_keys == []
    np.testing.assert_array_equal(a(x)._data, b(x)._data)
    assert b.fc1.weight._data is w_arr and b.fc1.weight.is_leaf and b.fc1.weight.requires_grad
    assert type(b.fc1.weight) is nn.Parameter
    # numpy arrays are accepted as values
    b.load_state_dict({k: v._data * 0 for k, v in sd.items()})
    assert not b.fc2.weight._data.any()


def test_module_load_state_dict_errors():
    m = nn.Linear(3, 2)
    sd = m.state_dict()
    bad = OrderedDict(weight=tg.zeros(3, 3), foo=tg.zeros(1))
    with pytest.raises(RuntimeError) as e:
        m.load_state_dict(bad)
    assert str(e.value) == (
        'Error(s) in loading state_dict for Linear:\n\tMissing key(s) in state_dict: "bias". '
        '\n\tUnexpected key(s) in state_dict: "foo". '
        '\n\tsize mismatch for weight: copying a param with shape [3, 3] from checkpoint, the shape in current '
        'model is [2, 3].')
    w0 = m.weight._data.copy()
    res = m.load_state_dict({"weight": tg.ones(2, 3), "foo": tg.zeros(1)}, strict=False)
    assert res.missing_keys == ["bias"] and res.unexpected_keys == ["foo"]
    np.testing.assert_array_equal(m.weight._data, np.ones((2, 3)))
    assert not np.array_equal(w0, m.weight._data)
    assert set(sd) == {"weight", "bias"}


def test_load_state_dict_bumps_version():
    m = nn.Linear(2, 1)
    out = (m(tg.ones(1, 2)) * m.weight).sum()       # saves the weight
    m.load_state_dict({"weight": tg.zeros(1, 2), "bias": tg.zeros(1)})
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


def test_module_repr():
    seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1, bias=False), nn.Sigmoid())
    assert repr(seq) == ("Sequential(\n  (0): Linear(in_features=3, out_features=4, bias=True)\n  (1): ReLU()\n"
                         "  (2): Linear(in_features=4, out_features=1, bias=False)\n  (3): Sigmoid()\n)")


# ----------------------------------------------------------------------------
# Linear, Sequential, activations
# ----------------------------------------------------------------------------
def test_linear_init_is_pytorch_default_and_seeded():
    tg.manual_seed(123)
    m = nn.Linear(16, 8)
    assert m.weight.shape == (8, 16) and m.bias.shape == (8,)
    assert m.in_features == 16 and m.out_features == 8
    # PyTorch's kaiming_uniform_(a=sqrt(5)) bound, gain * sqrt(3 / fan_in) (1/4 up to rounding), then the bias's
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + 5)) / math.sqrt(16)
    rng = np.random.default_rng(123)
    np.testing.assert_array_equal(m.weight._data, rng.uniform(-bound, bound, (8, 16)))
    np.testing.assert_array_equal(m.bias._data, rng.uniform(-1 / math.sqrt(16), 1 / math.sqrt(16), (8,)))
    tg.manual_seed(123)
    m2 = nn.Linear(16, 8)
    np.testing.assert_array_equal(m.weight._data, m2.weight._data)
    big = nn.Linear(400, 300)
    w = big.weight._data
    assert np.abs(w).max() <= 1 / 20 and np.abs(w).max() > 0.049
    assert abs(w.mean()) < 2e-3 and abs(w.std() - (1 / 20) / math.sqrt(3)) < 1e-3
    assert nn.Linear(3, 2, bias=False).bias is None
    assert [n for n, _ in nn.Linear(3, 2, bias=False).named_parameters()] == ["weight"]
    assert all(isinstance(p, nn.Parameter) for p in m.parameters())


def test_linear_forward_and_gradients_against_numpy():
    tg.manual_seed(0)
    m = nn.Linear(4, 3)
    xv = np.random.default_rng(1).standard_normal((5, 4))
    x = tg.tensor(xv, requires_grad=True)
    y = m(x)
    W, b = m.weight._data, m.bias._data
    np.testing.assert_allclose(y._data, xv @ W.T + b, rtol=1e-14)
    gv = np.random.default_rng(2).standard_normal((5, 3))
    (y * tg.tensor(gv)).sum().backward()
    np.testing.assert_allclose(m.weight.grad._data, gv.T @ xv, rtol=1e-13)
    np.testing.assert_allclose(m.bias.grad._data, gv.sum(0), rtol=1e-13)
    np.testing.assert_allclose(x.grad._data, gv @ W, rtol=1e-13)
    # 1-d input and F.linear without bias
    np.testing.assert_allclose(m(tg.tensor(xv[0]))._data, W @ xv[0] + b, rtol=1e-14)
    np.testing.assert_allclose(F.linear(tg.tensor(xv), m.weight)._data, xv @ W.T, rtol=1e-14)
    assert tg.autograd.gradcheck(lambda x, w, b: F.linear(x, w, b),
                                 (tg.tensor(xv, requires_grad=True), tg.tensor(W, requires_grad=True),
                                  tg.tensor(b, requires_grad=True)))


def test_linear_float32():
    m = nn.Linear(3, 2, dtype=tg.float32)
    assert m.weight.dtype == np.float32
    y = m(tg.ones(4, 3, dtype=tg.float32))
    assert y.dtype == np.float32


def test_sequential_and_activations():
    tg.manual_seed(0)
    seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2), nn.Sigmoid())
    assert len(seq) == 6 and isinstance(seq[0], nn.Linear) and isinstance(seq[-1], nn.Sigmoid)
    assert [type(m).__name__ for m in seq] == ["Linear", "ReLU", "Linear", "Tanh", "Linear", "Sigmoid"]
    xv = np.random.default_rng(0).standard_normal((6, 3))
    h = xv
    for i, fn in ((0, lambda z: np.maximum(z, 0)), (2, np.tanh), (4, lambda z: 1 / (1 + np.exp(-z)))):
        h = fn(h @ seq[i].weight._data.T + seq[i].bias._data)
    np.testing.assert_allclose(seq(tg.tensor(xv))._data, h, rtol=1e-13)
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias",
                                                     "4.weight", "4.bias"]
    sub = seq[:2]
    assert isinstance(sub, nn.Sequential) and len(sub) == 2 and sub[0] is seq[0]
    named = nn.Sequential(OrderedDict(lin=nn.Linear(2, 2), act=nn.ReLU()))
    assert [n for n, _ in named.named_parameters()] == ["lin.weight", "lin.bias"]
    v = tg.tensor([-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(nn.ReLU()(v)._data, [0, 0, 2])
    np.testing.assert_allclose(nn.Tanh()(v)._data, np.tanh(v._data))
    np.testing.assert_allclose(nn.Sigmoid()(v)._data, 1 / (1 + np.exp(-v._data)))
    np.testing.assert_array_equal(F.relu(v)._data, [0, 0, 2])


# ----------------------------------------------------------------------------
# functional losses
# ----------------------------------------------------------------------------
def np_log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    s = x - m
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def np_cross_entropy(logits, target, reduction="mean"):
    lp = np_log_softmax(logits, 1)
    loss = -lp[np.arange(len(target)), target]
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


def test_softmax_log_softmax():
    xv = np.random.default_rng(0).standard_normal((3, 4)) * 50
    np.testing.assert_allclose(F.log_softmax(tg.tensor(xv), 1)._data, np_log_softmax(xv, 1), rtol=1e-13)
    np.testing.assert_allclose(F.softmax(tg.tensor(xv), dim=0)._data, np.exp(np_log_softmax(xv, 0)),
                               rtol=1e-12, atol=1e-300)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        out = F.softmax(tg.tensor(xv))
    np.testing.assert_allclose(out._data.sum(1), 1.0)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_against_numpy(reduction):
    r = np.random.default_rng(0)
    logits = r.standard_normal((6, 5)) * 3
    logits[0] = [1000.0, -1000.0, 0.0, 999.0, 5.0]         # stable for huge logits
    target = r.integers(0, 5, 6)
    x = tg.tensor(logits, requires_grad=True)
    loss = F.cross_entropy(x, target, reduction=reduction)
    exp = np_cross_entropy(logits, target, reduction)
    assert np.all(np.isfinite(loss._data))
    np.testing.assert_allclose(loss._data, exp, rtol=1e-13)
    # gradient: (softmax - onehot) scaled by the reduction
    loss.sum().backward()
    onehot = np.eye(5)[target]
    scale = 1 / 6 if reduction == "mean" else 1.0
    np.testing.assert_allclose(x.grad._data, (np.exp(np_log_softmax(logits, 1)) - onehot) * scale,
                               rtol=1e-12, atol=1e-15)
    # a Tensor target works the same
    t_loss = F.cross_entropy(tg.tensor(logits), tg.tensor(target, dtype=tg.int64), reduction=reduction)
    np.testing.assert_allclose(t_loss._data, exp, rtol=1e-13)


def test_cross_entropy_gradcheck_and_tape_size():
    r = np.random.default_rng(1)
    x = tg.tensor(r.standard_normal((4, 3)), requires_grad=True)
    target = np.array([0, 2, 1, 2])
    for reduction in ("mean", "sum", "none"):
        assert tg.autograd.gradcheck(lambda x: F.cross_entropy(x, target, reduction=reduction), (x,))
    tg.core.tape.rotate()
    F.cross_entropy(x, target)
    names = tg.core.tape.current().entries()["name"]
    # leaf, log_softmax, one gather, mean and its negation: no per-class work on the tape
    assert len(names) <= 5


def test_cross_entropy_against_torch():
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(2)
    logits = r.standard_normal((7, 4)) * 4
    target = r.integers(0, 4, 7)
    target[3] = 1
    w = r.random(4) + 0.5
    cases = [dict(), dict(reduction="sum"), dict(reduction="none"), dict(weight=w), dict(ignore_index=1),
             dict(weight=w, ignore_index=1), dict(weight=w, reduction="sum"), dict(label_smoothing=0.2),
             dict(label_smoothing=0.1, weight=w), dict(label_smoothing=0.1, ignore_index=1)]
    for kw in cases:
        x = tg.tensor(logits, requires_grad=True)
        loss = F.cross_entropy(x, target, **kw)
        loss.sum().backward()
        xt = torch.tensor(logits, requires_grad=True)
        tkw = dict(kw)
        if "weight" in tkw:
            tkw["weight"] = torch.tensor(w)
        lt = torch.nn.functional.cross_entropy(xt, torch.tensor(target), **tkw)
        lt.sum().backward()
        np.testing.assert_allclose(loss._data, lt.detach().numpy(), rtol=1e-12, err_msg=str(kw))
        np.testing.assert_allclose(x.grad._data, xt.grad.numpy(), rtol=1e-11, atol=1e-14, err_msg=str(kw))
    # class-probability targets and (N, C, d) inputs
    probs = np.exp(np_log_softmax(r.standard_normal((7, 4)), 1))
    loss = F.cross_entropy(tg.tensor(logits), tg.tensor(probs))
    lt = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(probs))
    np.testing.assert_allclose(loss._data, lt.numpy(), rtol=1e-12)
    x3 = r.standard_normal((2, 4, 3))
    t3 = r.integers(0, 4, (2, 3))
    for red in ("mean", "none"):
        loss = F.cross_entropy(tg.tensor(x3), t3, reduction=red)
        lt = torch.nn.functional.cross_entropy(torch.tensor(x3), torch.tensor(t3), reduction=red)
        np.testing.assert_allclose(loss._data, lt.numpy(), rtol=1e-12)
    # a single sample
    loss = F.cross_entropy(tg.tensor(logits[0]), np.int64(target[0]))
    lt = torch.nn.functional.cross_entropy(torch.tensor(logits[0]), torch.tensor(target[0]))
    np.testing.assert_allclose(loss._data, lt.numpy(), rtol=1e-12)


def test_nll_loss():
    r = np.random.default_rng(3)
    lp = np_log_softmax(r.standard_normal((5, 3)), 1)
    target = np.array([0, 2, 1, 1, 0])
    x = tg.tensor(lp, requires_grad=True)
    loss = F.nll_loss(x, target)
    np.testing.assert_allclose(loss.item(), -lp[np.arange(5), target].mean(), rtol=1e-14)
    loss.backward()
    exp = np.zeros((5, 3))
    exp[np.arange(5), target] = -1 / 5
    np.testing.assert_allclose(x.grad._data, exp)
    np.testing.assert_allclose(F.nll_loss(tg.tensor(lp), target, reduction="none")._data,
                               -lp[np.arange(5), target])
    with pytest.raises(IndexError, match="Target 3 is out of bounds."):
        F.nll_loss(tg.tensor(lp), np.array([0, 3, 1, 1, 0]))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(5\) to match target batch_size \(2\)"):
        F.nll_loss(tg.tensor(lp), np.array([0, 1]))


def test_regression_losses():
    r = np.random.default_rng(4)
    a, b = r.standard_normal((3, 4)), r.standard_normal((3, 4))
    x = tg.tensor(a, requires_grad=True)
    loss = F.mse_loss(x, tg.tensor(b))
    np.testing.assert_allclose(loss.item(), ((a - b) ** 2).mean(), rtol=1e-14)
    loss.backward()
    np.testing.assert_allclose(x.grad._data, 2 * (a - b) / a.size, rtol=1e-14)
    np.testing.assert_allclose(F.mse_loss(x, tg.tensor(b), reduction="sum").item(), ((a - b) ** 2).sum())
    np.testing.assert_allclose(F.mse_loss(x, tg.tensor(b), reduction="none")._data, (a - b) ** 2)
    x.grad = None
    loss = F.l1_loss(x, tg.tensor(b))
    np.testing.assert_allclose(loss.item(), np.abs(a - b).mean(), rtol=1e-14)
    loss.backward()
    np.testing.assert_allclose(x.grad._data, np.sign(a - b) / a.size, rtol=1e-14)
    np.testing.assert_allclose(F.l1_loss(x, tg.tensor(b), reduction="none")._data, np.abs(a - b))
    with pytest.warns(UserWarning, match="Using a target size"):
        F.mse_loss(x, tg.tensor(b[0]))
    assert isinstance(nn.MSELoss()(x, tg.tensor(b)), tg.Tensor)


def np_bce_logits(x, y):
    return np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))


def test_bce_with_logits():
    xv = np.array([-1000.0, -30.0, -2.0, 0.0, 0.5, 3.0, 40.0, 1000.0])
    yv = np.array([0.0, 1.0, 0.3, 1.0, 0.0, 1.0, 0.0, 1.0])
    x = tg.tensor(xv, requires_grad=True)
    loss = F.binary_cross_entropy_with_logits(x, tg.tensor(yv), reduction="none")
    assert np.all(np.isfinite(loss._data))
    np.testing.assert_allclose(loss._data, np_bce_logits(xv, yv), rtol=1e-14)
    loss.sum().backward()
    sig = np.where(xv >= 0, 1 / (1 + np.exp(-np.abs(xv))), np.exp(-np.abs(xv)) / (1 + np.exp(-np.abs(xv))))
    np.testing.assert_allclose(x.grad._data, sig - yv, rtol=1e-13, atol=1e-300)
    assert x.grad._data[3] == 0.5 - 1.0               # the tie at 0 has the sigmoid's gradient
    np.testing.assert_allclose(F.binary_cross_entropy_with_logits(x, tg.tensor(yv)).item(),
                               np_bce_logits(xv, yv).mean(), rtol=1e-14)
    np.testing.assert_allclose(F.binary_cross_entropy_with_logits(x, tg.tensor(yv), reduction="sum").item(),
                               np_bce_logits(xv, yv).sum(), rtol=1e-14)
    xs = tg.tensor(np.random.default_rng(5).standard_normal(6), requires_grad=True)
    ys = tg.tensor(np.random.default_rng(6).random(6))
    assert tg.autograd.gradcheck(lambda x: F.binary_cross_entropy_with_logits(x, ys), (xs,))
    with pytest.raises(ValueError, match=r"Target size \(\[2\]\) must be the same as input size \(\[8\]\)"):
        F.binary_cross_entropy_with_logits(x, tg.tensor([1.0, 0.0]))


def test_bce_against_torch():
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(7)
    xv = r.standard_normal((4, 3)) * 5
    yv = r.random((4, 3))
    w = r.random((4, 3))
    pw = r.random(3) + 0.5
    for kw in (dict(), dict(weight=w), dict(pos_weight=pw), dict(reduction="sum", weight=w, pos_weight=pw)):
        x = tg.tensor(xv, requires_grad=True)
        loss = F.binary_cross_entropy_with_logits(x, yv, **{k: (v if isinstance(v, str) else tg.tensor(v))
                                                           for k, v in kw.items()})
        loss.backward()
        xt = torch.tensor(xv, requires_grad=True)
        lt = torch.nn.functional.binary_cross_entropy_with_logits(
            xt, torch.tensor(yv), **{k: (v if isinstance(v, str) else torch.tensor(v)) for k, v in kw.items()})
        lt.backward()
        np.testing.assert_allclose(loss.item(), lt.item(), rtol=1e-13, err_msg=str(kw))
        np.testing.assert_allclose(x.grad._data, xt.grad.numpy(), rtol=1e-12, atol=1e-15, err_msg=str(kw))
    p = 1 / (1 + np.exp(-xv))
    loss = F.binary_cross_entropy(tg.tensor(p), tg.tensor(yv))
    lt = torch.nn.functional.binary_cross_entropy(torch.tensor(p), torch.tensor(yv))
    np.testing.assert_allclose(loss.item(), lt.item(), rtol=1e-12)


def test_binary_cross_entropy_clamps_and_differentiates_as_pytorch():
    # each log clamped at -100 (log1p for 1 - p); the gradient PyTorch's (p - y) / max(p (1 - p),
    # 1e-12 as a float): finite where a log is clamped, so a saturated sigmoid gets gradient 0,
    # not nan; the target's gradient -logit(p).  (Values from torch 2.13.)
    p = tg.tensor([1e-17, 0.3, 1.0, 0.0, 1 - 1e-16], requires_grad=True)
    y = tg.tensor([0.0, 0.7, 0.0, 1.0, 0.5], requires_grad=True)
    loss = F.binary_cross_entropy(p, y, reduction="none")
    assert loss.grad_fn.name() == "BinaryCrossEntropyBackward0"
    assert loss.tolist() == [1e-17, 0.949783446209775, 100.0, 100.0, 18.36840028483855]
    loss.sum().backward()
    assert p.grad.tolist() == [1.000000003995803e-05, -1.9047619047619047, 1000000003995.8029,
                               -1000000003995.8029, 500000001997.9013]
    np.testing.assert_allclose(y.grad.numpy(), [39.14394658089878, 0.8472978603872036, -np.inf, np.inf,
                                                -36.7368005696771], rtol=1e-14)
    z = tg.tensor([40.0, -40.0, 0.0], requires_grad=True)
    F.binary_cross_entropy(tg.sigmoid(z), tg.tensor([0.0, 1.0, 0.0])).backward()
    np.testing.assert_allclose(z.grad.numpy(), [0.0, -1.416118090755725e-06, 1 / 6], rtol=1e-15)
    assert z.grad[0].item() == 0.0


def test_binary_cross_entropy_gradcheck_and_against_torch():
    r = np.random.default_rng(3)
    p = tg.tensor(r.uniform(0.05, 0.95, (3, 4)), requires_grad=True)
    y = tg.tensor(r.random((3, 4)), requires_grad=True)
    w = tg.tensor(r.random((3, 4)))
    for red in ("mean", "sum", "none"):
        f = lambda p, y: F.binary_cross_entropy(p, y, weight=w, reduction=red)      # noqa: E731
        assert tg.autograd.gradcheck(f, (p, y))
        assert tg.autograd.gradgradcheck(f, (p, y))
    torch = pytest.importorskip("torch")
    pv = r.uniform(0, 1, 12)
    pv[:3] = [0.0, 1.0, 1e-300]
    yv = r.random(12)
    for red in ("mean", "sum"):
        a, b = tg.tensor(pv, requires_grad=True), tg.tensor(yv, requires_grad=True)
        F.binary_cross_entropy(a, b, weight=tg.tensor(yv + 1), reduction=red).backward()
        at = torch.tensor(pv, requires_grad=True)
        bt = torch.tensor(yv, requires_grad=True)
        torch.nn.functional.binary_cross_entropy(at, bt, weight=torch.tensor(yv + 1), reduction=red).backward()
        np.testing.assert_allclose(a.grad.numpy(), at.grad.numpy(), rtol=1e-13)
        np.testing.assert_allclose(b.grad.numpy(), bt.grad.numpy(), rtol=1e-13)


def test_binary_cross_entropy_checks_its_input_at_every_replay():
    """Its check that the input lies in [0, 1] (NaN fails it, as in PyTorch) is a guard of
    the recorded tape, so a replayed call with another input raises, rather than giving
    NaN from the log of a negative number; the inputs in range replay to eager values."""
    y = tg.tensor([1.0, 0.0, 1.0])
    compiled = tg.compile(lambda p, t: F.binary_cross_entropy(p, t))
    for vals in ([0.2, 0.5, 0.9], [0.3, 0.4, 0.8], [0.3, 0.4, 0.7], [1.5, 0.4, 0.7], [0.3, -0.1, 0.6],
                 [float("nan"), 0.4, 0.6], [0.3, 0.4, 0.6]):
        p = tg.tensor(vals, requires_grad=True)
        if all(0 <= v <= 1 for v in vals):
            out = compiled(p, y)
            out.backward()
            want = -np.mean([np.log(vals[0]), np.log(1 - vals[1]), np.log(vals[2])])
            np.testing.assert_allclose(out.item(), want, rtol=1e-13)
            np.testing.assert_allclose(p.grad.numpy(), [-1 / (3 * vals[0]), 1 / (3 * (1 - vals[1])),
                                                        -1 / (3 * vals[2])], rtol=1e-12)
            continue
        for call in (compiled, F.binary_cross_entropy):
            with pytest.raises(RuntimeError, match="^all elements of input should be between 0 and 1$"):
                call(p, y)
    assert compiled.stats.replays >= 2 and compiled.stats.divergences >= 1


def test_bad_reduction():
    x = tg.tensor([[1.0, 2.0]])
    for fn, args in ((F.cross_entropy, (x, np.array([0]))), (F.nll_loss, (x, np.array([0]))),
                     (F.mse_loss, (x, x)), (F.l1_loss, (x, x)),
                     (F.binary_cross_entropy_with_logits, (x, x))):
        with pytest.raises(ValueError, match="^foo is not a valid value for reduction$"):
            fn(*args, reduction="foo")


# ----------------------------------------------------------------------------
# training
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("make_opt", [lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
                                      lambda ps: optim.Adam(ps, lr=0.01),
                                      lambda ps: optim.AdamW(ps, lr=0.01)], ids=["SGD", "Adam", "AdamW"])
def test_tiny_training_loop_classification(make_opt):
    tg.manual_seed(0)
    r = np.random.default_rng(0)
    xv = r.standard_normal((64, 2))
    labels = (xv[:, 0] * xv[:, 1] > 0).astype(np.int64)          # XOR-like quadrants
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
    optimizer = make_opt(model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    x = tg.tensor(xv)
    losses = []
    for _ in range(150):
        optimizer.zero_grad()
        loss = loss_fn(model(x), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    acc = (model(x)._data.argmax(1) == labels).mean()
    assert acc > 0.85


def test_tiny_training_loop_regression_seed_loop():
    tg.manual_seed(1)
    r = np.random.default_rng(1)
    xv = r.standard_normal((32, 3))
    yv = xv @ np.array([[1.0], [-2.0], [0.5]]) + 0.3
    model = nn.Linear(3, 1)
    optimizer = optim.SGD(model.parameters(), lr=0.1)
    loss_fn = F.mse_loss
    input, target = tg.tensor(xv), tg.tensor(yv)
    first = loss_fn(model(input), target).item()
    for _ in range(200):
        optimizer.zero_grad()
        loss_fn(model(input), target).backward()
        optimizer.step()
    assert loss_fn(model(input), target).item() < 1e-6 * first
    np.testing.assert_allclose(model.weight._data, [[1.0, -2.0, 0.5]], atol=1e-4)
    np.testing.assert_allclose(model.bias._data, [0.3], atol=1e-4)


def test_training_matches_torch():
    torch = pytest.importorskip("torch")
    tg.manual_seed(3)
    model = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 3))
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3)).double()
    with torch.no_grad():
        for tp, p in zip(tmodel.parameters(), model.parameters()):
            tp.copy_(torch.tensor(p._data))
    opt = optim.Adam(model.parameters(), lr=0.01, weight_decay=0.01)
    topt = torch.optim.Adam(tmodel.parameters(), lr=0.01, weight_decay=0.01)
    r = np.random.default_rng(3)
    xv = r.standard_normal((10, 3))
    yv = r.integers(0, 3, 10)
    for _ in range(10):
        opt.zero_grad()
        F.cross_entropy(model(tg.tensor(xv)), yv).backward()
        opt.step()
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tmodel(torch.tensor(xv)), torch.tensor(yv)).backward()
        topt.step()
    for tp, p in zip(tmodel.parameters(), model.parameters()):
        np.testing.assert_allclose(p._data, tp.detach().numpy(), rtol=1e-10, atol=1e-12)
    sd = opt.state_dict()
    tsd = topt.state_dict()
    assert sd["param_groups"][0]["params"] == tsd["param_groups"][0]["params"]
    assert set(sd["state"]) == set(tsd["state"])
