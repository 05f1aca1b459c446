"""tg.optim: trajectories against the reference's printed values (section 8 of
pytorch-autograd-semantics.md) and against torch, validation, state and zero_grad."""
import copy

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import optim

P0 = [1.0, 2.0]
G_FIXED = [[0.5, -1.0]] * 3
G_VARY = [[0.5, -1.0], [1.0, 0.25], [-0.5, 2.0]]


def run(make, grads, dtype=None, p0=P0):
    p = tg.tensor(p0, dtype=dtype, requires_grad=True)
    opt = make([p])
    out = []
    for g in grads:
        p.grad = tg.tensor(g, dtype=p.dtype)
        opt.step()
        out.append(p._data.copy())
    return p, opt, out


# (label, factory, grads, expected values after steps 1..3): the reference's table
REFERENCE = [
    ("SGD lr=.1", lambda ps: optim.SGD(ps, lr=.1), G_FIXED,
     [[0.95, 2.1], [0.9, 2.2], [0.85, 2.3]]),
    ("SGD mom", lambda ps: optim.SGD(ps, lr=.1, momentum=.9), G_FIXED,
     [[0.95, 2.1], [0.855, 2.29], [0.7195, 2.561]]),
    ("SGD mom nesterov", lambda ps: optim.SGD(ps, lr=.1, momentum=.9, nesterov=True), G_FIXED,
     [[0.905, 2.19], [0.7695, 2.461], [0.59755, 2.8049]]),
    ("SGD mom damp", lambda ps: optim.SGD(ps, lr=.1, momentum=.9, dampening=.5), G_FIXED,
     [[0.95, 2.1], [0.88, 2.24], [0.792, 2.416]]),
    ("SGD wd", lambda ps: optim.SGD(ps, lr=.1, weight_decay=.01), G_FIXED,
     [[0.949, 2.098], [0.898051, 2.195902], [0.847152949, 2.293706098]]),
    ("SGD mom wd", lambda ps: optim.SGD(ps, lr=.1, momentum=.9, weight_decay=.01), G_FIXED,
     [[0.949, 2.098], [0.852151, 2.284102], [0.714134749, 2.549309698]]),
    ("SGD mom nesterov wd", lambda ps: optim.SGD(ps, lr=.1, momentum=.9, nesterov=True, weight_decay=.01),
     G_FIXED, [[0.9031, 2.1862], [0.76507411, 2.45142622], [0.590209958191, 2.787439688182]]),
    ("SGD mom damp wd", lambda ps: optim.SGD(ps, lr=.1, momentum=.9, dampening=.5, weight_decay=.01),
     G_FIXED, [[0.949, 2.098], [0.8776255, 2.235151], [0.78794963725, 2.4074693245]]),
    ("SGD maximize", lambda ps: optim.SGD(ps, lr=.1, maximize=True), G_FIXED,
     [[1.05, 1.9], [1.1, 1.8], [1.15, 1.7]]),
    ("Adam lr=.1", lambda ps: optim.Adam(ps, lr=.1), G_FIXED,
     [[0.900000002, 2.099999999], [0.800000004, 2.199999998], [0.700000006, 2.299999997]]),
    ("Adam defaults", lambda ps: optim.Adam(ps), G_FIXED,
     [[0.99900000002, 2.00099999999], [0.99800000004, 2.00199999998], [0.99700000006, 2.00299999997]]),
    ("Adam wd", lambda ps: optim.Adam(ps, lr=.1, weight_decay=.01), G_FIXED,
     [[0.900000001961, 2.09999999898], [0.800005168006, 2.19999732381], [0.700018941428, 2.299990194775]]),
    ("AdamW", lambda ps: optim.AdamW(ps, lr=.1), G_FIXED,
     [[0.899000002, 2.097999999], [0.798101003998, 2.195901998001], [0.697302904994, 2.293706095003]]),
    ("Adam tiny g", lambda ps: optim.Adam(ps, lr=.1), [[1e-8, 1e-6]] * 3,
     [[0.95, 1.900990099], [0.9, 1.801980198], [0.85, 1.702970297]]),
    ("vary SGD mom", lambda ps: optim.SGD(ps, lr=.1, momentum=.9), G_VARY,
     [[0.95, 2.1], [0.805, 2.165], [0.7245, 2.0235]]),
    ("vary SGD nesterov", lambda ps: optim.SGD(ps, lr=.1, momentum=.9, nesterov=True), G_VARY,
     [[0.905, 2.19], [0.6745, 2.2235], [0.65205, 1.89615]]),
    ("vary SGD damp", lambda ps: optim.SGD(ps, lr=.1, momentum=.9, dampening=.5), G_VARY,
     [[0.95, 2.1], [0.855, 2.1775], [0.7945, 2.14725]]),
    ("vary Adam", lambda ps: optim.Adam(ps, lr=.1), G_VARY,
     [[0.900000002, 2.099999999], [0.8034818006, 2.1469468155], [0.7614728709, 2.1067643561]]),
    ("vary Adam wd", lambda ps: optim.Adam(ps, lr=.1, weight_decay=.01), G_VARY,
     [[0.900000002, 2.099999999], [0.8033666911, 2.1447372135], [0.7603815046, 2.103185003]]),
    ("vary AdamW", lambda ps: optim.AdamW(ps, lr=.1, weight_decay=.01), G_VARY,
     [[0.899000002, 2.097999999], [0.8015828006, 2.1428488155], [0.7587722881, 2.1005235073]]),
]


def _digits(v):
    """Half a unit in the last printed digit (the reference prints at most 12 decimals)."""
    s = repr(v)
    dec = len(s.split(".")[1]) if "." in s else 0
    return 0.5 * 10.0 ** -dec


@pytest.mark.parametrize("label,make,grads,expected", REFERENCE, ids=[r[0] for r in REFERENCE])
def test_reference_trajectories(label, make, grads, expected):
    _, _, out = run(make, grads)
    for got, exp in zip(out, expected):
        for g, e in zip(got, exp):
            # exact to 1e-9, and to the printed digits where they are finer
            assert abs(g - e) <= max(_digits(e), 1e-12) + 1e-15 or abs(g - e) <= 1e-9 and _digits(e) >= 1e-9
            assert abs(g - e) <= 1e-9


def test_reference_float32():
    p, _, out = run(lambda ps: optim.SGD(ps, lr=.1, momentum=.9), G_FIXED, dtype=tg.float32)
    assert p.dtype == np.float32 and all(o.dtype == np.float32 for o in out)
    exp = [[0.949999988079, 2.099999904633], [0.854999959469, 2.289999961853], [0.719499945641, 2.5609998703]]
    np.testing.assert_allclose(np.array(out, dtype=np.float64), exp, rtol=0, atol=1e-11)
    p, _, out = run(lambda ps: optim.Adam(ps, lr=.1), G_FIXED, dtype=tg.float32)
    assert p.dtype == np.float32
    exp = [[0.900000035763, 2.099999904633], [0.800000011921, 2.199999809265], [0.700000047684, 2.299999713898]]
    np.testing.assert_allclose(np.array(out, dtype=np.float64), exp, rtol=0, atol=1e-11)


def test_state_after_one_step():
    _, opt, _ = run(lambda ps: optim.SGD(ps, lr=.1, momentum=.9), G_FIXED[:1])
    (st,) = opt.state.values()
    assert list(st) == ["momentum_buffer"]
    np.testing.assert_array_equal(st["momentum_buffer"]._data, [0.5, -1.0])
    _, opt, _ = run(lambda ps: optim.Adam(ps, lr=.1), G_FIXED[:1])
    (st,) = opt.state.values()
    assert set(st) == {"step", "exp_avg", "exp_avg_sq"}
    assert isinstance(st["step"], tg.Tensor) and st["step"].ndim == 0 and st["step"].item() == 1.0
    np.testing.assert_allclose(st["exp_avg"]._data, [0.05, -0.1], rtol=1e-15)
    np.testing.assert_allclose(st["exp_avg_sq"]._data, [0.00025, 0.001], rtol=1e-12)
    _, opt, _ = run(lambda ps: optim.Adam(ps, lr=.1, amsgrad=True), G_FIXED[:1])
    (st,) = opt.state.values()
    assert set(st) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
    # no momentum: SGD keeps no buffer
    _, opt, _ = run(lambda ps: optim.SGD(ps, lr=.1), G_FIXED[:1])
    assert all("momentum_buffer" not in s for s in opt.state.values())


def _numpy_reference(kind, opts, grads, p0):
    """The section-8 formulas written out in NumPy."""
    p = np.array(p0, dtype=np.float64)
    out = []
    buf = m = v = vmax = None
    for t, g in enumerate(grads, 1):
        g = np.array(g, dtype=np.float64)
        if opts.get("maximize"):
            g = -g
        lr, wd = opts.get("lr", 1e-3), opts.get("weight_decay", 0.01 if kind == "AdamW" else 0)
        if kind == "SGD":
            mu, damp = opts.get("momentum", 0), opts.get("dampening", 0)
            d = g + wd * p
            if mu:
                buf = d.copy() if buf is None else mu * buf + (1 - damp) * d
                d = d + mu * buf if opts.get("nesterov") else buf
            p = p - lr * d
        else:
            b1, b2 = opts.get("betas", (0.9, 0.999))
            eps = opts.get("eps", 1e-8)
            if kind == "AdamW":
                p = p * (1 - lr * wd)
            else:
                g = g + wd * p
            m = (1 - b1) * g if m is None else b1 * m + (1 - b1) * g
            v = (1 - b2) * g * g if v is None else b2 * v + (1 - b2) * g * g
            vmax = v if vmax is None else np.maximum(vmax, v)
            vv = vmax if opts.get("amsgrad") else v
            p = p - (lr / (1 - b1 ** t)) * m / (np.sqrt(vv) / np.sqrt(1 - b2 ** t) + eps)
        out.append(p)
    return out


CONFIGS = [
    ("SGD", dict(lr=.1)),
    ("SGD", dict(lr=.05, momentum=.9)),
    ("SGD", dict(lr=.05, momentum=.9, nesterov=True)),
    ("SGD", dict(lr=.05, momentum=.8, dampening=.3)),
    ("SGD", dict(lr=.05, weight_decay=.1)),
    ("SGD", dict(lr=.05, momentum=.9, weight_decay=.1)),
    ("SGD", dict(lr=.05, momentum=.9, nesterov=True, weight_decay=.1)),
    ("SGD", dict(lr=.05, momentum=.9, dampening=.5, weight_decay=.1)),
    ("SGD", dict(lr=.05, momentum=.9, maximize=True)),
    ("SGD", dict(lr=.05, momentum=.9, nesterov=True, weight_decay=.1, maximize=True)),
    ("Adam", dict(lr=.1)),
    ("Adam", dict()),
    ("Adam", dict(lr=.05, betas=(0.8, 0.99), eps=1e-6)),
    ("Adam", dict(lr=.05, weight_decay=.1)),
    ("Adam", dict(lr=.05, amsgrad=True)),
    ("Adam", dict(lr=.05, amsgrad=True, weight_decay=.1, maximize=True)),
    ("Adam", dict(lr=.05, maximize=True)),
    ("AdamW", dict(lr=.1)),
    ("AdamW", dict(lr=.05, weight_decay=.1, amsgrad=True)),
    ("AdamW", dict(lr=.05, weight_decay=.1, maximize=True)),
]


def _random_grads(seed, steps=6, shape=(3, 4)):
    r = np.random.default_rng(seed)
    return r.standard_normal((steps,) + shape) * r.choice([1e-3, 1.0, 10.0], size=(steps,) + shape)


@pytest.mark.parametrize("kind,opts", CONFIGS, ids=["%s-%s" % (k, o) for k, o in CONFIGS])
def test_against_numpy_formulas(kind, opts):
    grads = _random_grads(1)
    p0 = np.random.default_rng(2).standard_normal((3, 4))
    _, _, out = run(lambda ps: getattr(optim, kind)(ps, **opts), grads, p0=p0)
    for got, exp in zip(out, _numpy_reference(kind, opts, grads, p0)):
        np.testing.assert_allclose(got, exp, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("kind,opts", CONFIGS, ids=["%s-%s" % (k, o) for k, o in CONFIGS])
def test_against_torch(kind, opts):
    torch = pytest.importorskip("torch")
    grads = _random_grads(3)
    p0 = np.random.default_rng(4).standard_normal((3, 4))
    p, opt, out = run(lambda ps: getattr(optim, kind)(ps, **opts), grads, p0=p0)
    pt = torch.tensor(p0, dtype=torch.float64, requires_grad=True)
    topt = getattr(torch.optim, kind)([pt], **opts)
    for g, got in zip(grads, out):
        pt.grad = torch.tensor(g)
        topt.step()
        np.testing.assert_allclose(got, pt.detach().numpy(), rtol=0, atol=1e-12)
    # the state matches too
    tst = topt.state.get(pt, {})
    st = opt.state.get(p, {})
    assert set(st) == set(tst)
    for k in st:
        np.testing.assert_allclose(np.asarray(st[k]._data, dtype=np.float64),
                                   tst[k].detach().double().numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("kind", ["SGD", "Adam", "AdamW"])
def test_float32_against_torch(kind):
    torch = pytest.importorskip("torch")
    opts = dict(lr=.1, momentum=.9, weight_decay=.01) if kind == "SGD" else dict(lr=.1, weight_decay=.01)
    grads = _random_grads(5).astype(np.float32)
    p0 = np.random.default_rng(6).standard_normal((3, 4)).astype(np.float32)
    p, _, out = run(lambda ps: getattr(optim, kind)(ps, **opts), grads, dtype=tg.float32, p0=p0)
    assert p.dtype == np.float32
    pt = torch.tensor(p0, requires_grad=True)
    topt = getattr(torch.optim, kind)([pt], **opts)
    for g, got in zip(grads, out):
        pt.grad = torch.tensor(g)
        topt.step()
        np.testing.assert_allclose(got, pt.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_param_groups_and_skips_none_grad():
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    b = tg.tensor([3.0], requires_grad=True)
    c = tg.tensor([5.0], requires_grad=True)
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5}, {"params": [c]}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5, 0.1]
    assert opt.param_groups[1]["momentum"] == 0.9 and opt.param_groups[1]["params"] == [b]
    a.grad = tg.tensor([1.0, 1.0])
    b.grad = tg.tensor([1.0])
    opt.step()
    np.testing.assert_allclose(a._data, [0.9, 1.9])
    np.testing.assert_allclose(b._data, [2.5])
    assert c._data[0] == 5.0 and c not in opt.state       # no grad: untouched, no state
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        opt.add_param_group({"params": [a]})


def test_update_is_in_place_and_unrecorded():
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    arr = p._data
    v0 = p._version
    opt = optim.Adam([p], lr=0.1)
    p.grad = tg.tensor([0.5, -1.0])
    opt.step()
    assert p._data is arr and p.is_leaf and p.grad_fn is None and p.requires_grad
    assert p._version > v0
    # the parameter still works in a new graph and accumulates into .grad
    p.grad = None
    (p * p).sum().backward()
    np.testing.assert_allclose(p.grad._data, 2 * p._data)


def test_step_invalidates_saved_parameter():
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    loss = (p * p).sum()          # saves p
    opt = optim.SGD([p], lr=0.1)
    p.grad = tg.tensor([1.0, 1.0])
    opt.step()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_step_inside_grad_mode_and_closure():
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.item() == 5.0
    np.testing.assert_allclose(p._data, [0.8, 1.6])


def test_validation_errors():
    p = tg.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="^Nesterov momentum requires a momentum and zero dampening$"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="^Nesterov momentum requires a momentum and zero dampening$"):
        optim.SGD([p], lr=0.1, momentum=0.9, dampening=0.1, nesterov=True)
    with pytest.raises(ValueError, match="^Invalid learning rate: -1$"):
        optim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="^Invalid learning rate: -1$"):
        optim.Adam([p], lr=-1)
    with pytest.raises(ValueError, match="^Invalid momentum value: -0.5$"):
        optim.SGD([p], momentum=-0.5)
    with pytest.raises(ValueError, match="^Invalid weight_decay value: -0.1$"):
        optim.SGD([p], weight_decay=-0.1)
    with pytest.raises(ValueError, match="^optimizer got an empty parameter list$"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="^optimizer got an empty parameter list$"):
        optim.Adam(iter([]))
    with pytest.raises(TypeError) as e:
        optim.SGD(p, lr=0.1)
    assert str(e.value) == ("params argument given to the optimizer should be an iterable of Tensors or "
                            "dicts, but got tapegrad.DoubleTensor")
    with pytest.raises(TypeError, match="but got tapegrad.FloatTensor$"):
        optim.Adam(tg.tensor([1.0], dtype=tg.float32, requires_grad=True))
    with pytest.raises(ValueError, match=r"^Invalid beta parameter at index 0: 1.0$"):
        optim.Adam([p], betas=(1.0, 0.999))
    with pytest.raises(ValueError, match=r"^Invalid beta parameter at index 1: -0.1$"):
        optim.AdamW([p], betas=(0.9, -0.1))
    with pytest.raises(ValueError, match=r"^Invalid epsilon value: -1e-08$"):
        optim.Adam([p], eps=-1e-8)
    with pytest.raises(ValueError, match="^can't optimize a non-leaf Tensor$"):
        optim.SGD([p * 2], lr=0.1)
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors"):
        optim.SGD([1.0], lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD([{"params": {p}}], lr=0.1)
    # a tensor that does not require grad is accepted (and, without a grad, skipped)
    q = tg.tensor([1.0])
    opt = optim.SGD([q], lr=0.1)
    opt.step()
    assert q._data[0] == 1.0


def test_defaults():
    p = tg.tensor([1.0], requires_grad=True)
    assert optim.SGD([p]).defaults == dict(lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                                            maximize=False)
    d = optim.Adam([p]).defaults
    assert d["lr"] == 1e-3 and d["betas"] == (0.9, 0.999) and d["eps"] == 1e-8 and d["weight_decay"] == 0
    assert d["amsgrad"] is False and d["maximize"] is False
    assert optim.AdamW([p]).defaults["weight_decay"] == 0.01


def test_zero_grad():
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    (p * 3).sum().backward()
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is g and np.all(p.grad._data == 0)
    (p * 3).sum().backward()
    np.testing.assert_array_equal(p.grad._data, [3.0, 3.0])
    opt.zero_grad()
    assert p.grad is None
    opt.zero_grad()                 # no grad: nothing to do
    opt.zero_grad(set_to_none=False)
    assert p.grad is None


def test_state_dict_round_trip():
    grads = _random_grads(7, steps=6, shape=(2, 3))
    p0 = np.random.default_rng(8).standard_normal((2, 3))
    for make in (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
                 lambda ps: optim.Adam(ps, lr=0.05, amsgrad=True),
                 lambda ps: optim.AdamW(ps, lr=0.05)):
        _, _, full = run(make, grads, p0=p0)
        p, opt, _ = run(make, grads[:3], p0=p0)
        sd = opt.state_dict()
        assert list(sd) == ["state", "param_groups"]
        assert list(sd["state"]) == [0] and sd["param_groups"][0]["params"] == [0]
        sd = copy.deepcopy(sd)
        # a fresh optimizer on a copy of the parameter continues the trajectory
        q = tg.tensor(p._data.copy(), requires_grad=True)
        opt2 = make([q])
        opt2.load_state_dict(sd)
        assert opt2.param_groups[0]["params"] == [q]
        for key in sd["param_groups"][0]:
            if key != "params":
                assert opt2.param_groups[0][key] == opt.param_groups[0][key]
        for g in grads[3:]:
            q.grad = tg.tensor(g)
            opt2.step()
        np.testing.assert_array_equal(q._data, full[-1])
        # loading copied the state: the original optimizer's buffers are untouched
        for k, v in opt.state[p].items():
            assert v is not opt2.state[q][k]


def test_load_state_dict_mismatch():
    a = tg.tensor([1.0], requires_grad=True)
    b = tg.tensor([1.0], requires_grad=True)
    sd = optim.SGD([a, b], lr=0.1).state_dict()
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        optim.SGD([a], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1).load_state_dict(sd)
