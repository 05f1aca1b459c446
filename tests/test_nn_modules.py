"""tg.nn's Module machinery and layer modules against PyTorch: containers, hooks,
state dicts with buffers, casts, nn.init, the torch.nn.modules import paths, reprs,
parameter names and initialisations, and the layers' outputs and gradients with
PyTorch's weights loaded (recurrent layers, attention, transformers, normalisations)."""
import copy
import math
import pickle
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn
from tapegrad.nn import functional as F
from tapegrad.nn import init


def _torch():
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float64)
    return torch


# -- containers ------------------------------------------------------------------------------------
def test_module_list_and_dict():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(layers) == 3 and isinstance(layers[-1], nn.Linear)
    assert [n for n, _ in layers.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias", "2.weight",
                                                         "2.bias"]
    layers.append(nn.ReLU())
    layers.insert(1, nn.Tanh())
    assert [type(m).__name__ for m in layers] == ["Linear", "Tanh", "Linear", "Linear", "ReLU"]
    del layers[1]
    assert list(layers._modules) == ["0", "1", "2", "3"]
    assert isinstance(layers[1:3], nn.ModuleList) and len(layers[1:3]) == 2
    layers += [nn.Sigmoid()]
    assert len(layers) == 5 and len(layers + nn.ModuleList([nn.Tanh()])) == 6
    with pytest.raises(IndexError, match="index 9 is out of range"):
        layers[9]
    with pytest.raises(TypeError, match="ModuleList.extend should be called with an iterable, but got Linear"):
        layers.extend(nn.Linear(1, 1))
    assert repr(nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.ReLU()])) == (
        "ModuleList(\n  (0-1): 2 x Linear(in_features=2, out_features=2, bias=True)\n  (2): ReLU()\n)")
    d = nn.ModuleDict({"b": nn.Linear(1, 2), "a": nn.ReLU()})
    assert list(d) == ["b", "a"] and "a" in d and len(d) == 2
    d["c"] = nn.Tanh()
    assert list(d.keys()) == ["b", "a", "c"]
    assert d.pop("a").__class__ is nn.ReLU and list(d) == ["b", "c"]
    d.update([("e", nn.Identity())])
    assert [n for n, _ in d.named_parameters()] == ["b.weight", "b.bias"]
    with pytest.raises(ValueError, match="ModuleDict update sequence element #0 has length 1; 2 is required"):
        d.update([("x",)])


def test_parameter_list_and_dict():
    pl = nn.ParameterList([nn.Parameter(tg.ones(2)), tg.zeros(3)])
    assert all(isinstance(p, nn.Parameter) for p in pl) and len(pl) == 2
    assert [n for n, _ in pl.named_parameters()] == ["0", "1"]
    pl.append(tg.ones(1, 2))
    assert repr(pl) == ("ParameterList(\n    (0): Parameter containing: [tapegrad.float64 of size 2]\n"
                        "    (1): Parameter containing: [tapegrad.float64 of size 3]\n"
                        "    (2): Parameter containing: [tapegrad.float64 of size 1x2]\n)")
    with pytest.raises(RuntimeError, match="ParameterList should not be called."):
        pl(1)
    pd = nn.ParameterDict({"w": tg.ones(2), "a": nn.Parameter(tg.zeros(1))})
    assert list(pd) == ["a", "w"]               # a plain dict is taken in sorted order, as PyTorch's
    pd["z"] = tg.ones(3)
    assert isinstance(pd["z"], nn.Parameter) and [n for n, _ in pd.named_parameters()] == ["a", "w", "z"]
    assert pd.get("missing") is None and "w" in pd
    pd2 = nn.ParameterDict(OrderedDict([("w", tg.ones(2)), ("a", tg.ones(1))]))
    assert list(pd2) == ["w", "a"]
    with pytest.raises(TypeError, match="not a string"):
        pd[1] = tg.ones(1)


def test_sequential_list_methods_and_ordered_dict():
    named = nn.Sequential(OrderedDict([("fc", nn.Linear(3, 2)), ("act", nn.ReLU())]))
    assert list(named._modules) == ["fc", "act"] and isinstance(named[0], nn.Linear)
    assert isinstance(named.fc, nn.Linear) and list(named[1:]._modules) == ["act"]
    s = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    s.append(nn.Linear(2, 1))
    s.insert(0, nn.Identity())
    assert [type(m).__name__ for m in s] == ["Identity", "Linear", "ReLU", "Linear"]
    t = s + nn.Sequential(nn.Tanh())
    assert len(t) == 5 and list(t._modules) == ["0", "1", "2", "3", "4"]
    assert len(nn.Sequential(nn.ReLU()) * 3) == 3
    del s[0]
    assert isinstance(s[0], nn.Linear)
    out = s(tg.randn(4, 3))
    assert out.shape == (4, 1)


# -- registration, traversal, state dicts ---------------------------------------------------------------
class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.bn = nn.BatchNorm2d(2)
        self.register_buffer("scale", tg.ones(1))
        self.register_buffer("cache", tg.zeros(2), persistent=False)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(8, 3))

    def forward(self, x):
        return self.head(self.bn(self.conv(x)) * self.scale)


def test_buffers_persistent_state_dict_and_strict_loading():
    net = _Net()
    assert [n for n, _ in net.named_buffers()] == ["scale", "cache", "bn.running_mean", "bn.running_var",
                                                   "bn.num_batches_tracked"]
    sd = net.state_dict()
    assert list(sd) == ["scale", "conv.weight", "conv.bias", "bn.weight", "bn.bias", "bn.running_mean",
                        "bn.running_var", "bn.num_batches_tracked", "head.1.weight", "head.1.bias"]
    other = _Net()
    other.load_state_dict(sd)
    for k in sd:
        np.testing.assert_array_equal(other.state_dict()[k].numpy(), sd[k].numpy())
    bad = dict(sd)
    del bad["bn.running_mean"]
    bad["extra"] = tg.ones(1)
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "bn.running_mean". \n\tUnexpected'):
        other.load_state_dict(bad)
    res = other.load_state_dict(bad, strict=False)
    assert res.missing_keys == ["bn.running_mean"] and res.unexpected_keys == ["extra"]
    # a checkpoint from before num_batches_tracked (version 1) still loads
    old = OrderedDict((k, v) for k, v in sd.items() if k != "bn.num_batches_tracked")
    old._metadata = {"bn": {"version": 1}}
    assert other.load_state_dict(old).missing_keys == []
    # assign=True takes the checkpoint's tensors
    w = tg.full((2, 1, 3, 3), 0.5)
    other.load_state_dict({**sd, "conv.weight": w}, assign=True)
    assert other.conv.weight._data is w._data and isinstance(other.conv.weight, nn.Parameter)


def test_state_dict_keys_match_torch():
    torch = _torch()
    pairs = [(nn.LSTM(3, 4, 2, bidirectional=True), torch.nn.LSTM(3, 4, 2, bidirectional=True)),
             (nn.GRU(3, 4, bias=False), torch.nn.GRU(3, 4, bias=False)),
             (nn.LSTM(3, 4, proj_size=2), torch.nn.LSTM(3, 4, proj_size=2)),
             (nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)), (nn.LayerNorm(4), torch.nn.LayerNorm(4)),
             (nn.MultiheadAttention(8, 2), torch.nn.MultiheadAttention(8, 2)),
             (nn.MultiheadAttention(8, 2, kdim=3, vdim=5, add_bias_kv=True),
              torch.nn.MultiheadAttention(8, 2, kdim=3, vdim=5, add_bias_kv=True)),
             (nn.TransformerEncoderLayer(8, 2, 16), torch.nn.TransformerEncoderLayer(8, 2, 16)),
             (nn.Transformer(8, 2, 1, 1, 16), torch.nn.Transformer(8, 2, 1, 1, 16)),
             (nn.Embedding(5, 3, padding_idx=0), torch.nn.Embedding(5, 3, padding_idx=0)),
             (nn.ConvTranspose2d(2, 4, 3, groups=2), torch.nn.ConvTranspose2d(2, 4, 3, groups=2)),
             (nn.CrossEntropyLoss(weight=tg.ones(3)), torch.nn.CrossEntropyLoss(weight=torch.ones(3))),
             (nn.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4)), (nn.PReLU(3), torch.nn.PReLU(3)),
             (nn.Bilinear(2, 3, 4), torch.nn.Bilinear(2, 3, 4)), (nn.RMSNorm(4), torch.nn.RMSNorm(4)),
             (nn.InstanceNorm1d(3, track_running_stats=True), torch.nn.InstanceNorm1d(3, track_running_stats=True))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ours, theirs in pairs:
            assert list(ours.state_dict()) == list(theirs.state_dict()), type(ours).__name__
            assert [tuple(v.shape) for v in ours.state_dict().values()] == \
                [tuple(v.shape) for v in theirs.state_dict().values()]
            assert repr(ours) == repr(theirs)


REPRS = [
    ("Conv2d(1, 2, 3, stride=1, padding='same')", None),
    ("Conv2d(1, 2, 3, padding=1, dilation=2, groups=1, bias=False, padding_mode='reflect')", None),
    ("Conv1d(4, 2, 3, padding='same')", None),
    ("ConvTranspose2d(4, 2, 3, stride=2, output_padding=1)", None),
    ("MaxPool2d(2)", None), ("MaxPool2d(3, 2, 1, ceil_mode=True)", None), ("AvgPool2d(3, 1, 1)", None),
    ("AvgPool1d(3)", None), ("AdaptiveAvgPool2d((1, 1))", None), ("AdaptiveMaxPool1d(4)", None),
    ("Dropout(0.2)", None), ("Dropout2d()", None), ("AlphaDropout(0.1)", None),
    ("Embedding(10, 3, padding_idx=2, max_norm=1.0)", None), ("BatchNorm2d(4, momentum=None)", None),
    ("InstanceNorm2d(3)", None), ("GroupNorm(2, 4, affine=False)", None), ("LayerNorm((3, 4), bias=False)", None),
    ("RMSNorm(4, eps=1e-6)", None), ("LocalResponseNorm(3)", None), ("GELU(approximate='tanh')", None),
    ("LeakyReLU(0.1, inplace=True)", None), ("ELU(0.5)", None), ("CELU()", None), ("SELU()", None),
    ("Hardtanh(-2.0, 2.0)", None), ("ReLU6()", None), ("Softmin(dim=1)", None), ("GLU()", None),
    ("Hardshrink(0.3)", None), ("Threshold(0.1, 20.0)", None), ("PReLU()", None), ("SiLU()", None),
    ("Upsample(scale_factor=2, mode='bilinear')", None), ("UpsamplingNearest2d(size=(4, 4))", None),
    ("PixelShuffle(2)", None), ("ZeroPad2d(1)", None), ("ReflectionPad1d((1, 2))", None),
    ("ConstantPad2d(2, 3.5)", None), ("Unfold((2, 3), stride=2)", None), ("Fold((4, 5), 2)", None),
    ("RNN(3, 4, nonlinearity='relu', batch_first=True)", None), ("GRU(3, 4, 2, dropout=0.5)", None),
    ("LSTMCell(3, 4)", None), ("RNNCell(3, 4, nonlinearity='relu')", None), ("Bilinear(2, 3, 4)", None),
    ("SmoothL1Loss(beta=0.5)", None), ("KLDivLoss(reduction='batchmean')", None), ("Identity(3, x=2)", None),
]


@pytest.mark.parametrize("spec", [r for r, _ in REPRS])
def test_repr_matches_torch(spec):
    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = eval("nn." + spec), eval("torch.nn." + spec)
    assert repr(ours) == repr(theirs)


def test_module_casts_and_to():
    m = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    m(tg.randn(4, 2)).sum().backward()
    assert m.float() is m
    assert all(p.dtype == np.float32 for p in m.parameters())
    assert all(p.grad.dtype == np.float32 for p in m.parameters())
    assert m[1].running_mean.dtype == np.float32 and m[1].num_batches_tracked.dtype == np.int64
    w = m[0].weight
    m.to(tg.float64)
    assert m[0].weight is w and w.dtype == np.float64          # the Parameter object stays
    assert m.to("cpu") is m and m.cpu() is m and m.double() is m
    m.half()
    assert m[0].weight.dtype == np.float16
    with pytest.raises(TypeError, match="nn.Module.to only accepts floating point or complex dtypes, but got "
                                        "desired dtype=torch.int64"):
        m.to(tg.int64)
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        m.cuda()


def test_apply_modules_named_modules_train_eval_requires_grad():
    net = _Net()
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Conv2d", "BatchNorm2d", "Flatten", "Linear", "Sequential", "_Net"]
    assert [n for n, _ in net.named_modules()] == ["", "conv", "bn", "head", "head.0", "head.1"]
    assert [n for n, _ in net.named_children()] == ["conv", "bn", "head"]
    assert len(list(net.parameters(recurse=False))) == 0 and len(list(net.parameters())) == 6
    net.eval()
    assert not any(m.training for m in net.modules())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    assert net.get_submodule("head.1") is net.head[1]
    assert net.get_parameter("head.1.bias") is net.head[1].bias
    assert net.get_buffer("bn.running_var") is net.bn.running_var
    with pytest.raises(AttributeError, match="Sequential has no attribute `x`"):
        net.get_submodule("head.x")
    with pytest.raises(AttributeError, match="`scale` is not an nn.Parameter"):
        net.get_parameter("scale")
    net.register_module("extra", nn.ReLU())
    assert net.extra.__class__ is nn.ReLU
    net.cache2 = nn.Buffer(tg.ones(1), persistent=False)
    assert "cache2" in dict(net.named_buffers()) and "cache2" not in net.state_dict()


def test_zero_grad_set_to_none():
    m = nn.Linear(2, 2)
    m(tg.ones(1, 2)).sum().backward()
    g = m.weight.grad
    m.zero_grad(set_to_none=False)
    assert m.weight.grad is g and not g.numpy().any()
    m.zero_grad()
    assert m.weight.grad is None


def test_deepcopy_and_pickle_of_modules():
    net = _Net()
    c = copy.deepcopy(net)
    assert c.conv.weight is not net.conv.weight
    np.testing.assert_array_equal(c.conv.weight.detach().numpy(), net.conv.weight.detach().numpy())
    u = pickle.loads(pickle.dumps(net))
    np.testing.assert_array_equal(u.state_dict()["bn.running_var"].numpy(), np.ones(2))
    x = tg.randn(2, 1, 4, 4)
    np.testing.assert_array_equal(u(x).detach().numpy(), net(x).detach().numpy())


def test_torch_nn_modules_import_paths():
    import importlib
    for path, names in [("tapegrad.nn.modules.linear", ["Linear", "Identity", "Bilinear"]),
                        ("tapegrad.nn.modules.container", ["Sequential", "ModuleList", "ModuleDict"]),
                        ("tapegrad.nn.modules.activation", ["ReLU", "GELU", "MultiheadAttention"]),
                        ("tapegrad.nn.modules.conv", ["Conv2d", "ConvTranspose1d"]),
                        ("tapegrad.nn.modules.pooling", ["MaxPool2d", "AdaptiveAvgPool2d"]),
                        ("tapegrad.nn.modules.batchnorm", ["BatchNorm2d"]),
                        ("tapegrad.nn.modules.instancenorm", ["InstanceNorm2d"]),
                        ("tapegrad.nn.modules.normalization", ["LayerNorm", "GroupNorm", "RMSNorm"]),
                        ("tapegrad.nn.modules.dropout", ["Dropout"]), ("tapegrad.nn.modules.sparse", ["Embedding"]),
                        ("tapegrad.nn.modules.rnn", ["LSTM", "GRUCell"]),
                        ("tapegrad.nn.modules.transformer", ["TransformerEncoderLayer", "Transformer"]),
                        ("tapegrad.nn.modules.loss", ["CrossEntropyLoss", "CTCLoss"]),
                        ("tapegrad.nn.modules.flatten", ["Flatten"]), ("tapegrad.nn.modules.module", ["Module"]),
                        ("tapegrad.nn.modules.fold", ["Fold"]), ("tapegrad.nn.modules.upsampling", ["Upsample"]),
                        ("tapegrad.nn.modules.pixelshuffle", ["PixelShuffle"]),
                        ("tapegrad.nn.modules.padding", ["ZeroPad2d"]),
                        ("tapegrad.nn.modules.distance", ["CosineSimilarity"]),
                        ("tapegrad.nn.parameter", ["Parameter", "Buffer"])]:
        mod = importlib.import_module(path)
        for n in names:
            cls = getattr(mod, n)
            assert getattr(nn, n) is cls
            if path != "tapegrad.nn.parameter" or n == "Parameter":
                assert cls.__module__ == path, (path, n)


# -- hooks ----------------------------------------------------------------------------------------
def test_forward_hooks():
    m = nn.Linear(2, 2)
    calls = []
    h1 = m.register_forward_pre_hook(lambda mod, args: calls.append("pre") or (args[0] * 2,))
    h2 = m.register_forward_hook(lambda mod, args, out: calls.append("post") or out + 1)
    x = tg.ones(1, 2)
    y = m(x)
    expected = F.linear(x * 2, m.weight, m.bias) + 1
    np.testing.assert_allclose(y.detach().numpy(), expected.detach().numpy())
    assert calls == ["pre", "post"]
    h1.remove()
    h2.remove()
    np.testing.assert_allclose(m(x).detach().numpy(), F.linear(x, m.weight, m.bias).detach().numpy())
    assert calls == ["pre", "post"]
    # with kwargs, prepend, always_call
    order = []
    m.register_forward_hook(lambda mod, args, kwargs, out: order.append(("kw", sorted(kwargs))), with_kwargs=True)
    m.register_forward_hook(lambda mod, args, out: order.append("first"), prepend=True)
    m(x)
    assert order == ["first", ("kw", [])]

    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")
    b = Boom()
    hit = []
    b.register_forward_hook(lambda mod, args, out: hit.append(out), always_call=True)
    with pytest.raises(ValueError, match="boom"):
        b(x)
    assert hit == [None]
    with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple of "
                                           "\\(new_args, new_kwargs\\)"):
        m.register_forward_pre_hook(lambda mod, args, kwargs: 3, with_kwargs=True)
        m(x)


def test_global_forward_hook():
    seen = []
    h = nn.modules.module.register_module_forward_hook(lambda mod, args, out: seen.append(type(mod).__name__))
    try:
        nn.Sequential(nn.Linear(2, 2), nn.ReLU())(tg.ones(1, 2))
    finally:
        h.remove()
    assert seen == ["Linear", "ReLU", "Sequential"]


def test_full_backward_hook_matches_torch(reverse):
    torch = _torch()
    results = {}
    for lib, mod in ((tg, nn), (torch, torch.nn)):
        lib.manual_seed(0)
        lin = mod.Linear(3, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.25]]))
            lin.bias.copy_(lib.tensor([0.1, -0.2]))
        got = []

        def hook(m, gin, gout, got=got):
            got.append(([None if g is None else g.detach().numpy().copy() for g in gin],
                        [g.detach().numpy().copy() for g in gout]))
            return (gin[0] * 2,)
        pre = []
        lin.register_full_backward_pre_hook(lambda m, gout, pre=pre: pre.append(gout[0].detach().numpy().copy()))
        lin.register_full_backward_hook(hook)
        x = lib.tensor([[1.0, -1.0, 2.0], [0.5, 0.0, 1.0]], requires_grad=True)
        (lin(x) * lib.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
        results[lib.__name__] = (got, pre, x.grad.numpy(), lin.weight.grad.numpy())
    (tg_got, tg_pre, tg_xg, tg_wg), (t_got, t_pre, t_xg, t_wg) = results["tapegrad"], results["torch"]
    assert len(tg_got) == len(t_got) == 1
    np.testing.assert_array_equal(tg_got[0][0][0], t_got[0][0][0])
    np.testing.assert_array_equal(tg_got[0][1][0], t_got[0][1][0])
    np.testing.assert_array_equal(tg_pre[0], t_pre[0])
    np.testing.assert_array_equal(tg_xg, t_xg)        # the hook's doubled grad_input reached x
    np.testing.assert_array_equal(tg_wg, t_wg)
    np.testing.assert_array_equal(tg_xg, 2 * np.array([[-1.0, 3.0, 3.5], [-1.0, 8.0, 10.0]]))


def test_backward_hook_errors():
    m = nn.Linear(2, 2)
    with pytest.raises(NotImplementedError, match="register_full_backward_hook"):
        m.register_backward_hook(lambda *a: None)
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="Backward hook returned an invalid number of grad_input, got 2, but "
                                           "expected 1"):
        m(tg.ones(1, 2, requires_grad=True)).sum().backward()


# -- nn.init ------------------------------------------------------------------------------------------------
def test_calculate_gain_is_pytorchs():
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("conv2d") == 1
    assert init.calculate_gain("tanh") == 5.0 / 3 and init.calculate_gain("relu") == math.sqrt(2.0)
    assert init.calculate_gain("leaky_relu") == math.sqrt(2.0 / (1 + 0.01 ** 2))
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2.0 / 1.04)
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="Unsupported nonlinearity foo"):
        init.calculate_gain("foo")
    with pytest.raises(ValueError, match="negative_slope True not a valid number"):
        init.calculate_gain("leaky_relu", True)


def _stats(t):
    a = t.numpy().reshape(-1)
    return a.min(), a.max(), a.mean(), a.std()


def _truncated_mean(a, b):
    """The mean of N(0, 1) truncated to [a, b]."""
    pdf = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)     # noqa: E731
    cdf = lambda x: (1 + math.erf(x / math.sqrt(2))) / 2               # noqa: E731
    return (pdf(a) - pdf(b)) / (cdf(b) - cdf(a))


def test_init_distributions_and_seeding():
    shape = (400, 500)
    w = tg.empty(shape)
    lo, hi, mean, std = _stats(init.uniform_(w, -2.0, 3.0))
    assert -2 <= lo and hi < 3 and abs(mean - 0.5) < 0.02 and abs(std - 5 / math.sqrt(12)) < 0.01
    lo, hi, mean, std = _stats(init.normal_(w, 1.0, 0.5))
    assert abs(mean - 1.0) < 0.005 and abs(std - 0.5) < 0.005
    lo, hi, mean, std = _stats(init.trunc_normal_(w, 0.0, 1.0, -1.0, 1.5))
    assert lo >= -1.0 and hi <= 1.5 and abs(mean - _truncated_mean(-1.0, 1.5)) < 0.005
    lo, hi, mean, std = _stats(init.trunc_normal_(w, 0.0, 1.0, 2.0, 3.0))      # the uniform proposals' branch
    assert lo >= 2.0 and hi <= 3.0 and abs(mean - _truncated_mean(2.0, 3.0)) < 0.005
    fan_in, fan_out = 500, 400
    a = math.sqrt(6.0 / (fan_in + fan_out))
    lo, hi, mean, std = _stats(init.xavier_uniform_(w))
    assert -a <= lo and hi <= a and abs(std - a / math.sqrt(3)) < 1e-3
    lo, hi, mean, std = _stats(init.xavier_normal_(w, gain=2.0))
    assert abs(std - 2.0 * math.sqrt(2.0 / (fan_in + fan_out))) < 1e-3
    bound = math.sqrt(2.0) * math.sqrt(3.0 / fan_in)
    lo, hi, mean, std = _stats(init.kaiming_uniform_(w, nonlinearity="relu"))
    assert -bound <= lo and hi <= bound and abs(std - bound / math.sqrt(3)) < 1e-3
    lo, hi, mean, std = _stats(init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu"))
    assert abs(std - math.sqrt(2.0 / fan_out)) < 1e-3
    q = init.orthogonal_(tg.empty(3, 5), gain=2.0).numpy()
    np.testing.assert_allclose(q @ q.T, 4 * np.eye(3), atol=1e-12)
    np.testing.assert_array_equal(init.eye_(tg.empty(2, 3)).numpy(), np.eye(2, 3))
    d = init.dirac_(tg.empty(4, 2, 3)).numpy()
    assert d[0, 0, 1] == 1 and d[1, 1, 1] == 1 and d.sum() == 2
    s = init.sparse_(tg.empty(10, 4), 0.3).numpy()
    assert ((s == 0).sum(0) == 3).all()
    assert init.constant_(tg.empty(2), 0.5).numpy().tolist() == [0.5, 0.5]
    assert init.ones_(tg.empty(2)).numpy().tolist() == [1, 1] and init.zeros_(tg.ones(2)).numpy().tolist() == [0, 0]
    # reproducible under tg.manual_seed, and from a generator
    tg.manual_seed(3)
    a1 = init.kaiming_uniform_(tg.empty(3, 4)).numpy()
    tg.manual_seed(3)
    assert np.array_equal(a1, init.kaiming_uniform_(tg.empty(3, 4)).numpy())
    g = tg.Generator().manual_seed(5)
    b1 = init.normal_(tg.empty(3), generator=g).numpy()
    assert np.array_equal(b1, init.normal_(tg.empty(3), generator=tg.Generator().manual_seed(5)).numpy())
    with pytest.warns(FutureWarning, match="`nn.init.normal` is now deprecated in favor of `nn.init.normal_`"):
        init.normal(tg.empty(2))
    with pytest.raises(ValueError, match="Fan in and fan out can not be computed for tensor with fewer than 2 "
                                         "dimensions"):
        init.xavier_uniform_(tg.empty(3))


def test_init_leaves_parameters_leaves():
    p = nn.Parameter(tg.empty(3, 3))
    init.xavier_uniform_(p)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None


def test_layer_initialisations_follow_pytorchs_distributions():
    tg.manual_seed(0)
    conv = nn.Conv2d(16, 32, 3)
    bound = 1 / math.sqrt(16 * 9)
    w = conv.weight.detach().numpy()
    assert np.abs(w).max() <= bound and abs(w.std() - bound / math.sqrt(3)) < 2e-3
    emb = nn.Embedding(1000, 20, padding_idx=3)
    assert abs(emb.weight.detach().numpy().std() - 1) < 0.02 and not emb.weight.detach().numpy()[3].any()
    lstm = nn.LSTM(10, 25)
    assert all(np.abs(p.detach().numpy()).max() <= 1 / 5 for p in lstm.parameters())
    mha = nn.MultiheadAttention(16, 4)
    a = math.sqrt(6 / (16 + 48))
    assert np.abs(mha.in_proj_weight.detach().numpy()).max() <= a and not mha.in_proj_bias.detach().numpy().any()
    ln = nn.LayerNorm(5)
    assert ln.weight.detach().numpy().tolist() == [1.0] * 5 and ln.bias.detach().numpy().tolist() == [0.0] * 5
    tg.manual_seed(9)
    m1 = nn.Transformer(8, 2, 1, 1, 16)
    tg.manual_seed(9)
    m2 = nn.Transformer(8, 2, 1, 1, 16)
    assert all(np.array_equal(a.detach().numpy(), b.detach().numpy()) for a, b in zip(m1.parameters(), m2.parameters()))


# -- layers against torch, with torch's weights loaded ------------------------------------------------
def _load_from(ours, theirs):
    ours.load_state_dict({k: tg.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})


def _compare(torch, ours, theirs, inputs, mode="never", rtol=1e-11):
    _load_from(ours, theirs)
    tin = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in inputs]
    gin = [tg.tensor(a, requires_grad=a.dtype.kind == "f") for a in inputs]
    yt, yg = theirs(*tin), ours(*gin)

    def flat(o):
        if isinstance(o, (tuple, list)):
            return [t for x in o for t in flat(x)]
        return [] if o is None else [o]
    ft, fg = flat(yt), flat(yg)
    assert len(ft) == len(fg)
    rng = np.random.default_rng(1)
    gs = [rng.standard_normal(tuple(t.shape)) for t in ft]
    sum((a * torch.tensor(g)).sum() for a, g in zip(ft, gs)).backward()
    total = None
    for a, g in zip(fg, gs):
        term = (a * tg.tensor(g)).sum()
        total = term if total is None else total + term
    total.backward()
    for a, b in zip(ft, fg):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=rtol, atol=1e-13)
    for a, b in zip(tin, gin):
        if a.requires_grad:
            np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=rtol, atol=1e-13)
    pt, pg = dict(theirs.named_parameters()), dict(ours.named_parameters())
    assert list(pt) == list(pg)
    for k in pt:
        np.testing.assert_allclose(pg[k].grad.numpy(), pt[k].grad.numpy(), rtol=rtol, atol=1e-13, err_msg=k)


X = np.random.default_rng(0).standard_normal((5, 3, 4))
RECURRENT = [
    ("RNN(4, 6)", [X]), ("RNN(4, 6, nonlinearity='relu', num_layers=2)", [X]),
    ("LSTM(4, 6, 2, bidirectional=True)", [X]), ("LSTM(4, 6, batch_first=True, bias=False)", [X]),
    ("LSTM(4, 6, proj_size=3, num_layers=2)", [X]), ("LSTM(4, 6)", [X[:, 0]]),
    ("GRU(4, 6, 2, bidirectional=True, batch_first=True)", [X]), ("GRU(4, 6)", [X[:, 0]]),
    ("LSTMCell(4, 6)", [X[0]]), ("GRUCell(4, 6)", [X[0]]), ("RNNCell(4, 6)", [X[0]]), ("GRUCell(4, 6)", [X[0, 0]]),
    ("MultiheadAttention(4, 2)", [X, X[:4], X[:4]]), ("MultiheadAttention(4, 2, batch_first=True)", [X, X, X]),
    ("MultiheadAttention(4, 2, kdim=3, vdim=2, add_bias_kv=True, add_zero_attn=True)",
     [X, X[:4, :, :3], X[:4, :, :2]]),
    ("TransformerEncoderLayer(4, 2, 8, dropout=0.0)", [X]),
    ("TransformerEncoderLayer(4, 2, 8, dropout=0.0, activation='gelu', norm_first=True, batch_first=True)", [X]),
    ("TransformerDecoderLayer(4, 2, 8, dropout=0.0)", [X, X[:4]]),
    ("Transformer(4, 2, 2, 1, 8, dropout=0.0)", [X, X[:4]]),
    ("BatchNorm1d(3)", [X]), ("BatchNorm2d(3, momentum=None)", [X.reshape(1, 3, 5, 4)]),
    ("InstanceNorm1d(3, affine=True)", [X]), ("GroupNorm(1, 3)", [X]),
    ("LayerNorm((3, 4))", [X]), ("RMSNorm(4)", [X]), ("PReLU(3)", [X]),
    ("Bilinear(4, 4, 2)", [X, X[::-1].copy()]), ("Conv1d(3, 2, 3, padding=1, padding_mode='circular')", [X]),
    ("ConvTranspose1d(3, 4, 2, stride=2)", [X]),
]


@pytest.mark.parametrize("spec", [s for s, _ in RECURRENT])
def test_layers_match_torch(spec, reverse):
    torch = _torch()
    inputs = dict(RECURRENT)[spec]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs, ours = eval("torch.nn." + spec), eval("nn." + spec)
    _compare(torch, ours, theirs, inputs)


def test_transformer_encoder_warns_as_torch():
    torch = _torch()
    for kw in (dict(), dict(batch_first=True), dict(batch_first=True, norm_first=True)):
        with warnings.catch_warnings(record=True) as ours:
            warnings.simplefilter("always")
            nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 8, **kw), 1)
        with warnings.catch_warnings(record=True) as theirs:
            warnings.simplefilter("always")
            torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(4, 2, 8, **kw), 1)
        assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]


def test_lstm_initial_state_and_errors():
    torch = _torch()
    theirs, ours = torch.nn.LSTM(4, 6, 2), nn.LSTM(4, 6, 2)
    _load_from(ours, theirs)
    h0, c0 = np.random.default_rng(2).standard_normal((2, 2, 3, 6))
    yt, (ht, ct) = theirs(torch.tensor(X), (torch.tensor(h0), torch.tensor(c0)))
    yg, (hg, cg) = ours(tg.tensor(X), (tg.tensor(h0), tg.tensor(c0)))
    for a, b in ((yt, yg), (ht, hg), (ct, cg)):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-12, atol=1e-14)
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(2, 3, 6\), got \[1, 3, 6\]"):
        ours(tg.tensor(X), (tg.zeros(1, 3, 6), tg.zeros(1, 3, 6)))
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. Expected 4, got 3"):
        ours(tg.zeros(5, 3, 3))
    with pytest.raises(ValueError, match="LSTM: Expected input to be 2D or 3D, got 4D instead"):
        ours(tg.zeros(1, 5, 3, 4))
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(4, 6, proj_size=6)
    ours.flatten_parameters()          # a no-op, as on the CPU
    assert len(ours.all_weights) == 2 and len(ours.all_weights[0]) == 4


def test_batchnorm_running_statistics_match_torch():
    torch = _torch()
    for momentum in (0.1, None):
        theirs, ours = torch.nn.BatchNorm2d(3, momentum=momentum), nn.BatchNorm2d(3, momentum=momentum)
        for seed in range(3):
            x = np.random.default_rng(seed).standard_normal((4, 3, 2, 5))
            theirs(torch.tensor(x))
            ours(tg.tensor(x))
        for k, v in theirs.state_dict().items():
            np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-13, err_msg=k)
        theirs.eval()
        ours.eval()
        x = np.random.default_rng(5).standard_normal((2, 3, 2, 2))
        np.testing.assert_allclose(ours(tg.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(),
                                   rtol=1e-12)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training, got input size "
                                         "torch.Size\\(\\[1, 3\\]\\)"):
        nn.BatchNorm1d(3)(tg.zeros(1, 3))
    with pytest.raises(ValueError, match="expected 4D input \\(got 3D input\\)"):
        nn.BatchNorm2d(3)(tg.zeros(1, 3, 2))


def test_dropout_modules_in_training_and_evaluation():
    tg.manual_seed(0)
    d = nn.Dropout(0.25)
    x = tg.ones(200, 100)
    y = d(x).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.01 and np.allclose(y[kept], 1 / 0.75)
    d.eval()
    assert d(x) is x
    d2 = nn.Dropout2d(0.5)
    y = d2(tg.ones(50, 40, 3, 3)).numpy()
    per_channel = y.reshape(50, 40, 9)
    assert ((per_channel == 0).all(-1) | (per_channel == 2).all(-1)).all()
    assert nn.Dropout(0.0)(x) is x
    z = F.dropout(tg.ones(4), 1.0)
    assert not z.numpy().any()
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        nn.Dropout(1.5)
    a = nn.AlphaDropout(0.2)
    out = a(tg.randn(2000, 100)).numpy()
    assert abs(out.mean()) < 0.02 and abs(out.std() - 1) < 0.02      # SELU's self-normalising dropout


def test_embedding_from_pretrained_and_max_norm():
    w = tg.tensor([[1.0, 2.0], [3.0, 4.0], [0.1, 0.1]])
    e = nn.Embedding.from_pretrained(w)
    assert not e.weight.requires_grad and e.weight._data is w._data
    out = e(tg.tensor([[2, 0]]))
    np.testing.assert_array_equal(out.numpy(), [[[0.1, 0.1], [1.0, 2.0]]])
    m = nn.Embedding(3, 2, max_norm=1.0)
    with tg.no_grad():
        m.weight.copy_(tg.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]]))
    m(tg.tensor([0, 1]))
    np.testing.assert_allclose(m.weight.detach().numpy(), [[3 / (5 + 1e-7), 4 / (5 + 1e-7)], [0.3, 0.4], [6.0, 8.0]])
    with pytest.raises(IndexError, match="index out of range in self"):
        m(tg.tensor([3]))
    with pytest.raises(RuntimeError, match="Expected tensor for argument #1 'indices' to have one of the following "
                                           "scalar types: Long, Int"):
        m(tg.tensor([0.0]))


def test_one_hot():
    out = F.one_hot(tg.tensor([0, 2, 1]), 4)
    assert out.dtype == np.int64 and out.numpy().tolist() == [[1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0]]
    assert F.one_hot(tg.tensor([[3]])).shape == (1, 1, 4)
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes."):
        F.one_hot(tg.tensor([5]), 3)


def test_sdpa_matches_torch_with_dropout_seeded_and_gqa():
    torch = _torch()
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((2, 4, 5, 3)), rng.standard_normal((2, 2, 5, 3)), rng.standard_normal((2, 2, 5, 3))
    yt = torch.nn.functional.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)), enable_gqa=True)
    yg = F.scaled_dot_product_attention(*map(tg.tensor, (q, k, v)), enable_gqa=True)
    np.testing.assert_allclose(yg.numpy(), yt.numpy(), rtol=1e-12)
    tg.manual_seed(1)
    a = F.scaled_dot_product_attention(*map(tg.tensor, (q, k, k)), dropout_p=0.5, enable_gqa=True)
    tg.manual_seed(1)
    b = F.scaled_dot_product_attention(*map(tg.tensor, (q, k, k)), dropout_p=0.5, enable_gqa=True)
    assert np.array_equal(a.numpy(), b.numpy())
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when is_causal=True"):
        F.scaled_dot_product_attention(tg.tensor(q), tg.tensor(q), tg.tensor(q), attn_mask=tg.zeros(5, 5),
                                       is_causal=True)


def test_a_small_cnn_trains_like_torch():
    """A few SGD steps of Conv2d / BatchNorm / MaxPool / Dropout(eval) / Linear, against torch."""
    torch = _torch()

    def build(mod):
        return mod.Sequential(mod.Conv2d(1, 4, 3, padding=1), mod.BatchNorm2d(4), mod.ReLU(), mod.MaxPool2d(2),
                              mod.Conv2d(4, 6, 3), mod.GELU(), mod.AdaptiveAvgPool2d(2), mod.Flatten(),
                              mod.Dropout(0.3), mod.Linear(24, 3))
    theirs, ours = build(torch.nn), build(nn)
    _load_from(ours, theirs)
    theirs.eval()
    ours.eval()
    opt_t, opt_g = torch.optim.SGD(theirs.parameters(), lr=0.1), tg.optim.SGD(ours.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    for step in range(4):
        x, y = rng.standard_normal((5, 1, 8, 8)), rng.integers(0, 3, 5)
        lt = torch.nn.functional.cross_entropy(theirs(torch.tensor(x)), torch.tensor(y))
        lg = F.cross_entropy(ours(tg.tensor(x)), tg.tensor(y))
        assert abs(lt.item() - lg.item()) < 1e-12 * max(1, abs(lt.item()))
        for opt, loss in ((opt_t, lt), (opt_g, lg)):
            opt.zero_grad()
            loss.backward()
            opt.step()


# -- tg.compile: layers replay, and what a replay would get wrong is refused (run eagerly) ----------------
def test_compiled_models_replay_and_match_eager():
    tg.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 6, 3), nn.GELU(),
                        nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.LayerNorm(24), nn.Dropout(0.0), nn.Linear(24, 3))
    lstm, head = nn.LSTM(4, 5, batch_first=True), nn.Linear(5, 2)
    attn = nn.MultiheadAttention(8, 2, batch_first=True)

    def cnn(x, y):
        return F.cross_entropy(net(x), y)

    def rnn(x):
        return (head(lstm(x)[0]) ** 2).mean()

    def mha(x):
        return attn(x, x, x, need_weights=False)[0].sum()
    rng = np.random.default_rng(0)
    for fn, make, params in ((cnn, lambda: (tg.tensor(rng.standard_normal((5, 1, 8, 8))),
                                            tg.tensor(rng.integers(0, 3, 5))), list(net.parameters())),
                             (rnn, lambda: (tg.tensor(rng.standard_normal((3, 6, 4))),), list(lstm.parameters())),
                             (mha, lambda: (tg.tensor(rng.standard_normal((2, 5, 8))),), list(attn.parameters()))):
        step = tg.compile(fn)
        for _ in range(3):
            args = make()
            for p in params:
                p.grad = None
            eager = fn(*args)
            eager.backward()
            want = [p.grad.numpy().copy() for p in params]
            for p in params:
                p.grad = None
            got = step(*args)
            got.backward()
            # (a replay may sum in another order: its compiled forward)
            np.testing.assert_allclose(got.item(), eager.item(), rtol=1e-13)
            for p, w in zip(params, want):
                np.testing.assert_allclose(p.grad.numpy(), w, rtol=1e-12, atol=1e-15)
        assert step.stats.replays == 2, step.why


def test_compile_refuses_in_place_statistics_updates():
    """BatchNorm in training mode updates its running statistics in Python: a replay would not,
    so tg.compile runs it eagerly, and the statistics are those of eager calls."""
    bn, ref = nn.BatchNorm1d(3), nn.BatchNorm1d(3)
    step = tg.compile(lambda x: bn(x).sum())
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = tg.tensor(rng.standard_normal((4, 3)))
        step(x)
        ref(x)
    assert step.stats.replays == 0
    assert bn.num_batches_tracked.item() == 3
    np.testing.assert_array_equal(bn.running_mean.numpy(), ref.running_mean.numpy())
    emb = nn.Embedding(5, 2, padding_idx=0)
    look = tg.compile(lambda i: emb(i).sum())
    for i in ([[1, 0]], [[2, 3]], [[0, 0]]):
        np.testing.assert_array_equal(look(tg.tensor(i)).item(), emb(tg.tensor(i)).sum().item())


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_recurrent_layers_gradcheck_and_gradgradcheck(kind):
    tg.manual_seed(0)
    layer = getattr(nn, kind)(3, 4, bidirectional=True)
    x = tg.tensor(np.random.default_rng(0).standard_normal((4, 2, 3)), requires_grad=True)
    w = layer.weight_hh_l0_reverse

    def f(x, w_hh):
        with tg.no_grad():
            old = layer.weight_hh_l0_reverse
        layer._parameters["weight_hh_l0_reverse"] = w_hh        # (the weight as an argument)
        try:
            out, h = layer(x)
        finally:
            layer._parameters["weight_hh_l0_reverse"] = old
        h = h[0] if isinstance(h, tuple) else h
        return (out * out).sum() + h.sum()
    w_arg = tg.tensor(w.detach().numpy(), requires_grad=True)
    assert tg.autograd.gradcheck(f, (x, w_arg))
    assert tg.autograd.gradgradcheck(f, (x, w_arg))


def _tiny_gpt(lib, vocab=11, block=8, width=16, heads=2, layers=2):
    """A GPT of nanoGPT's shape (pre-norm blocks, causal F.scaled_dot_product_attention, GELU
    MLP, tied embedding), written for these tests."""
    mod, fn = lib.nn, lib.nn.functional

    class Block(mod.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = mod.LayerNorm(width), mod.LayerNorm(width)
            self.attn, self.proj = mod.Linear(width, 3 * width), mod.Linear(width, width)
            self.fc, self.out = mod.Linear(width, 4 * width), mod.Linear(4 * width, width)
            self.gelu, self.drop = mod.GELU(), mod.Dropout(0.0)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.attn(self.ln_1(x)).split(width, dim=2)
            q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))
            y = fn.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.drop(self.proj(y.transpose(1, 2).contiguous().view(B, T, C)))
            return x + self.out(self.gelu(self.fc(self.ln_2(x))))

    class GPT(mod.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = mod.Embedding(vocab, width), mod.Embedding(block, width)
            self.h = mod.ModuleList([Block() for _ in range(layers)])
            self.ln_f = mod.LayerNorm(width)
            self.head = mod.Linear(width, vocab, bias=False)
            self.head.weight = self.wte.weight
            self.apply(self._init)

        def _init(self, m):
            if isinstance(m, (mod.Linear, mod.Embedding)):
                mod.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, mod.Linear) and m.bias is not None:
                mod.init.zeros_(m.bias)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(lib.arange(idx.shape[1]))
            for blk in self.h:
                x = blk(x)
            logits = self.head(self.ln_f(x))
            return fn.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1), ignore_index=-1)
    return GPT()


def test_a_tiny_gpt_trains_as_torch_step_by_step(reverse):
    torch = _torch()
    torch.manual_seed(0)
    theirs, ours = _tiny_gpt(torch), _tiny_gpt(tg)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _load_from(ours, theirs)
    assert ours.head.weight is ours.wte.weight
    opt_t = torch.optim.AdamW(theirs.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
    opt_g = tg.optim.AdamW(ours.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
    rng = np.random.default_rng(0)
    for step in range(4):
        x, y = rng.integers(0, 11, (3, 8)), rng.integers(0, 11, (3, 8))
        y[0, :2] = -1
        lt, lg = theirs(torch.tensor(x), torch.tensor(y)), ours(tg.tensor(x), tg.tensor(y))
        np.testing.assert_allclose(lg.item(), lt.item(), rtol=1e-13)
        for opt, loss in ((opt_t, lt), (opt_g, lg)):
            opt.zero_grad()
            loss.backward()
            opt.step()
    # (normwise: the key third of attn.bias gets no gradient, the softmax being shift invariant, so
    # its values are roundoff that AdamW amplifies, about 1e-13 in either library)
    for (k, a), b in zip(theirs.named_parameters(), ours.parameters()):
        a = a.detach().numpy()
        np.testing.assert_allclose(b.detach().numpy(), a, rtol=1e-11, atol=1e-11 * np.abs(a).max(), err_msg=k)


def _train_small_convnet(lib, epochs=2):
    """An image classifier trained as the usual example scripts do (a Dataset with a
    transform, a DataLoader, conv-relu-conv-relu-max_pool2d-dropout-flatten-linear,
    log_softmax + nll_loss, Adadelta stepped by StepLR, an evaluation pass under
    eval()/no_grad after each epoch), written for these tests; the weights are drawn
    by NumPy and loaded, so both libraries start equal.  Returns the training losses,
    the evaluation (summed loss, correct count) per epoch and the final parameters."""
    mod, fn, data = lib.nn, lib.nn.functional, lib.utils.data
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 4, size=24)
    images = rng.integers(0, 50, size=(24, 12, 12)).astype(np.uint8)
    for i, t in enumerate(labels):                                  # a bright square placed by the label
        images[i, 2 + 5 * (t // 2):6 + 5 * (t // 2), 2 + 5 * (t % 2):6 + 5 * (t % 2)] = 220

    class Squares(data.Dataset):
        def __init__(self, lo, hi):
            self.lo, self.n = lo, hi - lo

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            img = lib.from_numpy(images[self.lo + i][None].copy()).to(lib.float64).div(255)
            return (img - 0.2) / 0.3, int(labels[self.lo + i])

    class Net(mod.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = mod.Conv2d(1, 4, 3, 1), mod.Conv2d(4, 6, 3, 1)
            self.dropout = mod.Dropout(0.0)
            self.fc1, self.fc2 = mod.Linear(6 * 4 * 4, 16), mod.Linear(16, 4)

        def forward(self, x):
            x = fn.max_pool2d(fn.relu(self.conv2(fn.relu(self.conv1(x)))), 2)
            x = fn.relu(self.fc1(lib.flatten(self.dropout(x), 1)))
            return fn.log_softmax(self.fc2(x), dim=1)

    model = Net()
    wrng = np.random.default_rng(8)
    model.load_state_dict({k: lib.tensor(wrng.normal(0, 0.3, tuple(v.shape))) for k, v in model.state_dict().items()})
    train_loader = data.DataLoader(Squares(0, 16), batch_size=6)           # (batches of 6, 6, 4)
    test_loader = data.DataLoader(Squares(16, 24), batch_size=5)
    optimizer = lib.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = lib.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    losses, evals = [], []
    for _ in range(epochs):
        model.train()
        for x, target in train_loader:
            optimizer.zero_grad()
            loss = fn.nll_loss(model(x), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        total, correct = 0.0, 0
        with lib.no_grad():
            for x, target in test_loader:
                out = model(x)
                total += fn.nll_loss(out, target, reduction="sum").item()
                correct += out.argmax(dim=1, keepdim=True).eq(target.view(-1, 1)).sum().item()
        evals.append((total, correct))
        scheduler.step()
    assert scheduler.get_last_lr() == [0.7 ** epochs]
    return losses, evals, [p.detach().numpy() for p in model.parameters()]


# PyTorch 2.13's values for _train_small_convnet (float64), so that the test checks without torch too
CONVNET_LOSSES = [3.365832079874663, 3.180613020012315, 2.0122361216548326, 2.614385678472395, 1.9044263035966562,
                  1.2784242105012573]
CONVNET_EVALS = [(20.86883897568794, 2), (15.362571570095646, 4)]


def test_a_small_convnet_trains_as_torch_step_by_step(reverse):
    losses, evals, params = _train_small_convnet(tg)
    np.testing.assert_allclose(losses, CONVNET_LOSSES, rtol=1e-13)
    np.testing.assert_allclose([t for t, _ in evals], [t for t, _ in CONVNET_EVALS], rtol=1e-13)
    assert [c for _, c in evals] == [c for _, c in CONVNET_EVALS]
    try:
        torch = _torch()
    except pytest.skip.Exception:
        return
    losses_t, evals_t, params_t = _train_small_convnet(torch)
    np.testing.assert_allclose(losses, losses_t, rtol=1e-13)
    for a, b in zip(params, params_t):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-14)
