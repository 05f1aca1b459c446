"""tg.optim's RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, SparseAdam and LBFGS:
trajectories against PyTorch's printed values and against torch (100 steps, to 1e-12),
state layout, parameter groups, state_dict round trips and argument checks."""
import copy
import warnings

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import optim

G_VARY = [[0.5, -1.0], [1.0, 0.25], [-0.5, 2.0]]

# (optimizer, options, parameters after steps 1..3 from [1, 2] with G_VARY): PyTorch 2.13's
# values (float64), printed to 15 significant digits
REFERENCE = [
    ("RMSprop", dict(lr=.1),
     [[1.99999960481811e-07, 2.99999990000001], [-0.895322681911416, 2.75631483433869],
      [-0.485021199351702, 1.86561856692709]]),
    ("RMSprop", dict(lr=.1, alpha=.9, momentum=.9, centered=True, weight_decay=.1),
     [[0.666666685185184, 2.33333331944445], [0.0592125194843332, 2.46287584951957],
      [-0.358590945999698, 2.27267416281666]]),
    ("Adagrad", dict(lr=.1),
     [[0.90000000002, 2.09999999999], [0.810557280928008, 2.07574643748872], [0.851382109971061, 1.98685754860378]]),
    ("Adagrad", dict(lr=.1, lr_decay=.5, weight_decay=.1, initial_accumulator_value=.5),
     [[0.935300336084914, 2.07492686491952], [0.884455343617783, 2.04867025164489],
      [0.898250107130817, 2.00443374771223]]),
    ("Adadelta", dict(),
     [[0.996837785583488, 2.0031622618489], [0.992797232301987, 2.00202266485326],
      [0.995352551846728, 1.99793791664532]]),
    ("Adadelta", dict(lr=.5, rho=.5, weight_decay=.1, maximize=True),
     [[1.00070710236181, 1.99929289370986], [1.00166108966253, 1.9993518000378], [1.00079929853259, 2.00017514147659]]),
    ("Adamax", dict(lr=.1),
     [[0.900000002, 2.099999999], [0.823684213289474, 2.13424476974443], [0.793949682007269, 2.10813775880485]]),
    ("Adamax", dict(lr=.1, betas=(.3, .5), weight_decay=.1),
     [[0.900000001666667, 2.09999999875], [0.81037403213095, 2.06321070190181], [0.815385265235408, 1.98911616622883]]),
    ("NAdam", dict(lr=.1),
     [[0.894354824277365, 2.10564517677909], [0.798060090466774, 2.08640734995336], [0.83549136509022, 1.9881816906738]]),
    ("NAdam", dict(lr=.1, betas=(.3, .5), weight_decay=.1, decoupled_weight_decay=True),
     [[0.879254685674065, 2.09074531543339], [0.756060927210574, 2.03520030561943],
      [0.813470574248059, 1.89246007140412]]),
    ("RAdam", dict(lr=.1),
     [[0.95, 2.1], [0.873684210526316, 2.13421052631579], [0.843979413478345, 2.08199650417557]]),
    ("RAdam", dict(lr=.1, betas=(.3, .5), weight_decay=.1),
     [[0.94, 2.08], [0.842, 2.06323076923077], [0.84441726618705, 1.89979745434422]]),
]


def run(kind, opts, grads, p0=(1.0, 2.0), dtype=None):
    p = tg.tensor(np.asarray(p0), dtype=dtype, requires_grad=True)
    opt = getattr(optim, kind)([p], **opts)
    out = []
    for g in grads:
        p.grad = tg.tensor(np.asarray(g), dtype=p.dtype)
        opt.step()
        out.append(p._data.copy())
    return p, opt, out


@pytest.mark.parametrize("kind,opts,expected", REFERENCE, ids=["%s-%s" % (k, o) for k, o, _ in REFERENCE])
def test_reference_trajectories(kind, opts, expected):
    _, _, out = run(kind, opts, G_VARY)
    np.testing.assert_allclose(np.array(out), expected, rtol=1e-14, atol=1e-14)


CONFIGS = [
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=.01, alpha=.9, momentum=.9, centered=True, weight_decay=.1)),
    ("RMSprop", dict(momentum=.5, maximize=True)),
    ("RMSprop", dict(centered=True, eps=1e-3)),
    ("Adagrad", dict()),
    ("Adagrad", dict(lr=.1, lr_decay=.01, weight_decay=.1, initial_accumulator_value=.5, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=.5, rho=.8, weight_decay=.1, maximize=True)),
    ("Adamax", dict()),
    ("Adamax", dict(lr=.01, betas=(.3, .99), weight_decay=.1, maximize=True)),
    ("NAdam", dict()),
    ("NAdam", dict(lr=.01, betas=(.3, .99), weight_decay=.1, momentum_decay=.01)),
    ("NAdam", dict(weight_decay=.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict()),
    ("RAdam", dict(lr=.01, betas=(.3, .9), weight_decay=.1)),
    ("RAdam", dict(weight_decay=.1, decoupled_weight_decay=True, maximize=True)),
]


def _grads(seed, steps, shape=(3, 4)):
    r = np.random.default_rng(seed)
    return r.standard_normal((steps,) + shape) * r.choice([1e-3, 1.0, 10.0], size=(steps,) + shape)


@pytest.fixture
def torch64():
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float64)       # (tapegrad's default: the step counters are float64 too)
    return torch


@pytest.mark.parametrize("kind,opts", CONFIGS, ids=["%s-%s" % c for c in CONFIGS])
def test_100_steps_against_torch(torch64, kind, opts):
    torch = torch64
    grads = _grads(11, 100)
    p0 = np.random.default_rng(12).standard_normal((3, 4))
    p, opt, out = run(kind, opts, grads, p0=p0)
    pt = torch.tensor(p0, requires_grad=True)
    topt = getattr(torch.optim, kind)([pt], **opts)
    for g, got in zip(grads, out):
        pt.grad = torch.tensor(g)
        topt.step()
        np.testing.assert_allclose(got, pt.detach().numpy(), rtol=0, atol=1e-12)
    st, tst = opt.state[p], topt.state[pt]
    assert list(st) == list(tst)            # the same keys, in the same order
    for k in st:
        assert isinstance(st[k], tg.Tensor) and st[k].shape == tuple(tst[k].shape)
        np.testing.assert_allclose(st[k]._data, tst[k].detach().numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("kind,opts", CONFIGS[::2], ids=["%s-%s" % c for c in CONFIGS[::2]])
def test_float32_against_torch(kind, opts):
    torch = pytest.importorskip("torch")
    grads = _grads(13, 20).astype(np.float32)
    p0 = np.random.default_rng(14).standard_normal((3, 4)).astype(np.float32)
    p, opt, out = run(kind, opts, grads, p0=p0, dtype=tg.float32)
    assert p.dtype == np.float32 and all(o.dtype == np.float32 for o in out)
    pt = torch.tensor(p0, requires_grad=True)
    topt = getattr(torch.optim, kind)([pt], **opts)
    for g, got in zip(grads, out):
        pt.grad = torch.tensor(g)
        topt.step()
        np.testing.assert_allclose(got, pt.detach().numpy(), rtol=1e-6, atol=1e-6)
    assert all(v.dtype == np.float32 for k, v in opt.state[p].items() if k not in ("step", "mu_product"))


@pytest.mark.parametrize("kind", ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"])
def test_param_groups_against_torch(torch64, kind):
    """Two groups with their own lr, a parameter without a gradient (skipped, no
    state except Adagrad's, made in its constructor), and a group added later."""
    torch = torch64
    r = np.random.default_rng(15)
    a0, b0, c0, d0 = r.standard_normal(3), r.standard_normal((2, 2)), r.standard_normal(2), r.standard_normal(4)

    def build(lib):
        a, b, c, d = (lib.tensor(v, requires_grad=True) for v in (a0, b0, c0, d0))
        opt = getattr(lib.optim, kind)([{"params": [a, c]}, {"params": [b], "lr": 0.03}], lr=0.02)
        return (a, b, c, d), opt

    (a, b, c, d), opt = build(tg)
    (ta, tb, tc, td), topt = build(torch)
    for i, g in enumerate(_grads(16, 12, (9,))):
        if i == 5:
            opt.add_param_group({"params": d, "lr": 0.05})
            topt.add_param_group({"params": td, "lr": 0.05})
        for x, tx, sl in ((a, ta, slice(0, 3)), (b, tb, slice(3, 7)), (d, td, slice(5, 9))):
            if x is d and i < 5:
                continue
            x.grad = tg.tensor(g[sl].reshape(x.shape))
            tx.grad = torch.tensor(g[sl].reshape(x.shape))
        opt.step()
        topt.step()
        for x, tx in ((a, ta), (b, tb), (c, tc), (d, td)):
            np.testing.assert_allclose(x._data, tx.detach().numpy(), rtol=0, atol=1e-13)
    assert np.array_equal(c._data, c0)
    assert (c in opt.state) == (tc in topt.state)
    assert set(opt.param_groups[2]) == set(opt.defaults) | {"params"} == set(topt.param_groups[2]) - {
        "foreach", "fused", "capturable", "differentiable"}


def test_param_group_defaults_filled():
    p, q = (tg.tensor([1.0], requires_grad=True) for _ in range(2))
    opt = optim.RMSprop([{"params": [p]}, {"params": [q], "alpha": 0.5, "lr": 1.0}], lr=0.1, momentum=0.2)
    assert opt.param_groups[0]["alpha"] == 0.99 and opt.param_groups[1]["alpha"] == 0.5
    assert opt.param_groups[1]["momentum"] == 0.2 and opt.param_groups[1]["lr"] == 1.0
    with pytest.raises(ValueError, match="^some parameters appear in more than one parameter group$"):
        opt.add_param_group({"params": [p]})


def test_adagrad_state_made_in_constructor():
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.Adagrad([p], initial_accumulator_value=0.25)
    st = opt.state[p]
    assert list(st) == ["step", "sum"] and st["step"].item() == 0.0
    np.testing.assert_array_equal(st["sum"]._data, [0.25, 0.25])
    # a parameter added later gets the constructor's defaults' value (PyTorch reads self.defaults)
    q = tg.tensor([1.0], requires_grad=True)
    opt.add_param_group({"params": [q], "initial_accumulator_value": 9.0})
    q.grad = tg.tensor([2.0])
    opt.step()
    np.testing.assert_allclose(opt.state[q]["sum"]._data, [4.25])
    np.testing.assert_allclose(q._data, [1.0 - 0.01 * 2.0 / (np.sqrt(4.25) + 1e-10)], rtol=1e-15)


@pytest.mark.parametrize("kind,opts", [("RMSprop", dict(momentum=.9, centered=True)), ("Adagrad", dict(lr_decay=.1)),
                                       ("Adadelta", dict()), ("Adamax", dict()), ("NAdam", dict()),
                                       ("RAdam", dict(weight_decay=.1, decoupled_weight_decay=True))])
def test_state_dict_round_trip(kind, opts):
    grads = _grads(17, 8, (2, 3))
    p0 = np.random.default_rng(18).standard_normal((2, 3))
    _, _, full = run(kind, opts, grads, p0=p0)
    p, opt, _ = run(kind, opts, grads[:4], p0=p0)
    sd = copy.deepcopy(opt.state_dict())
    assert list(sd) == ["state", "param_groups"] and list(sd["state"]) == [0]
    assert list(sd["state"][0]) == list(opt.state[p])
    q = tg.tensor(p._data.copy(), requires_grad=True)
    opt2 = getattr(optim, kind)([q], **opts)
    opt2.load_state_dict(sd)
    for g in grads[4:]:
        q.grad = tg.tensor(g)
        opt2.step()
    np.testing.assert_array_equal(q._data, full[-1])
    # saved with tg.save and loaded back
    assert all(v is not opt.state[p][k] for k, v in opt2.state[q].items())


def test_state_dict_through_save_and_load(tmp_path):
    p, opt, _ = run("NAdam", dict(lr=0.1), G_VARY[:2])
    tg.save(opt.state_dict(), tmp_path / "opt.pt")
    sd = tg.load(tmp_path / "opt.pt")
    assert sd["state"][0]["mu_product"].item() == opt.state[p]["mu_product"].item()
    assert sd["param_groups"][0]["momentum_decay"] == 4e-3


def test_defaults_and_implementation_options():
    p = tg.tensor([1.0], requires_grad=True)
    assert optim.RMSprop([p]).defaults == dict(lr=1e-2, momentum=0, alpha=0.99, eps=1e-8, centered=False,
                                               weight_decay=0, maximize=False)
    assert optim.Adagrad([p]).defaults == dict(lr=1e-2, lr_decay=0, eps=1e-10, weight_decay=0,
                                               initial_accumulator_value=0, maximize=False)
    assert optim.Adadelta([p]).defaults == dict(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False)
    assert optim.Adamax([p]).defaults == dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                                              maximize=False)
    assert optim.NAdam([p]).defaults == dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                                             momentum_decay=4e-3, decoupled_weight_decay=False, maximize=False)
    assert optim.RAdam([p]).defaults == dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                                             maximize=False, decoupled_weight_decay=False)
    assert optim.LBFGS([p]).defaults == dict(lr=1, max_iter=20, max_eval=25, tolerance_grad=1e-7,
                                             tolerance_change=1e-9, history_size=100, line_search_fn=None)
    # foreach / fused / capturable choose among PyTorch's implementations: accepted
    optim.RMSprop([p], foreach=True, capturable=False)
    optim.Adagrad([p], foreach=False, fused=None)
    optim.Adamax([p], foreach=True)
    optim.NAdam([p], foreach=False, capturable=False)
    with pytest.raises(NotImplementedError, match="differentiable=True"):
        optim.RAdam([p], differentiable=True)
    with pytest.raises(RuntimeError, match=r"^`fused` and `foreach` cannot be `True` together.$"):
        optim.Adagrad([p], foreach=True, fused=True)


@pytest.mark.parametrize("call,message", [
    (lambda p: optim.RMSprop([p], lr=-1), "Invalid learning rate: -1"),
    (lambda p: optim.RMSprop([p], alpha=-0.5), "Invalid alpha value: -0.5"),
    (lambda p: optim.RMSprop([p], momentum=-1), "Invalid momentum value: -1"),
    (lambda p: optim.RMSprop([p], eps=-1e-8), "Invalid epsilon value: -1e-08"),
    (lambda p: optim.Adagrad([p], lr_decay=-1), "Invalid lr_decay value: -1"),
    (lambda p: optim.Adagrad([p], initial_accumulator_value=-1), "Invalid initial_accumulator_value value: -1"),
    (lambda p: optim.Adagrad([p], weight_decay=-1), "Invalid weight_decay value: -1"),
    (lambda p: optim.Adadelta([p], rho=1.5), "Invalid rho value: 1.5"),
    (lambda p: optim.Adamax([p], betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
    (lambda p: optim.NAdam([p], momentum_decay=-1), "Invalid momentum_decay value: -1"),
    (lambda p: optim.RAdam([p], betas=(0.9, 1.0)), "Invalid beta parameter at index 1: 1.0"),
    (lambda p: optim.SparseAdam([p], lr=0), "Invalid learning rate: 0"),
    (lambda p: optim.SparseAdam([p], eps=0), "Invalid epsilon value: 0"),
    (lambda p: optim.LBFGS([p], lr=-1), "Invalid learning rate: -1"),
    (lambda p: optim.LBFGS([{"params": [p]}, {"params": [tg.tensor([1.0], requires_grad=True)]}]),
     "LBFGS doesn't support per-parameter options (parameter groups)"),
    (lambda p: optim.Adamax([]), "optimizer got an empty parameter list"),
])
def test_validation(call, message):
    p = tg.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError) as e:
        call(p)
    assert str(e.value) == message


def test_validation_messages_are_torchs():
    torch = pytest.importorskip("torch")
    for name, kw in [("RMSprop", dict(alpha=-0.5)), ("Adagrad", dict(lr_decay=-1)), ("Adadelta", dict(rho=1.5)),
                     ("NAdam", dict(momentum_decay=-1)), ("Adamax", dict(betas=(1.0, 0.9))),
                     ("SparseAdam", dict(eps=0))]:
        with pytest.raises(ValueError) as ours:
            getattr(optim, name)([tg.tensor([1.0], requires_grad=True)], **kw)
        with pytest.raises(ValueError) as theirs:
            getattr(torch.optim, name)([torch.tensor([1.0], requires_grad=True)], **kw)
        assert str(ours.value) == str(theirs.value)


def test_sparse_adam_refuses_dense_gradients():
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SparseAdam([p])
    assert opt.defaults == dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False)
    opt.step()                                  # no gradient: nothing to do
    p.grad = tg.tensor([1.0, 1.0])
    with pytest.raises(RuntimeError) as e:
        opt.step()
    assert str(e.value) == "SparseAdam does not support dense gradients, please consider Adam instead"
    np.testing.assert_array_equal(p._data, [1.0, 2.0])


def test_step_is_in_place_unrecorded_and_bumps_versions():
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    loss = (p * p).sum()
    opt = optim.RMSprop([p], lr=0.1)
    p.grad = tg.tensor([1.0, 1.0])
    arr = p._data
    opt.step()
    assert p._data is arr and p.is_leaf and p.grad_fn is None
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_closure_runs_with_grad_enabled():
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.Adamax([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with tg.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 5.0
    np.testing.assert_allclose(p._data, [0.9, 1.9], rtol=1e-8)


# -- LBFGS -----------------------------------------------------------------------------
def _rosenbrock(x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


X0 = [-1.2, 1.0, 0.5, -0.3, 2.0]
LBFGS_CASES = [
    (dict(), [-0.962050943, 0.935739321, 0.880713738, 0.777877882, 0.605093011], 77, 77),
    (dict(history_size=3, max_iter=7), [-0.962052329, 0.935740612, 0.880714465, 0.777877686, 0.605093101], 66, 66),
    (dict(line_search_fn="strong_wolfe"), [-0.962053085, 0.935742717, 0.880719625, 0.777887888, 0.605108918], 59, 52),
    (dict(line_search_fn="strong_wolfe", lr=0.5, tolerance_change=0),
     [0.999999999, 0.999999999, 0.999999997, 0.999999994, 0.999999988], 108, 83),
]


def _lbfgs_run(lib, opts, x0=X0, steps=15):
    x = lib.tensor(x0, requires_grad=True)
    opt = lib.optim.LBFGS([x], **opts)

    def closure():
        opt.zero_grad()
        loss = _rosenbrock(x)
        loss.backward()
        return loss

    losses = [float(opt.step(closure).detach()) for _ in range(steps)]
    return x, opt, losses


@pytest.mark.parametrize("opts,x_end,evals,iters", LBFGS_CASES, ids=[str(c[0]) for c in LBFGS_CASES])
def test_lbfgs_reference(opts, x_end, evals, iters):
    """15 steps on the 5-d Rosenbrock function: PyTorch's end point (to its printed 9
    decimals) and its counts of evaluations and iterations."""
    x, opt, losses = _lbfgs_run(tg, opts)
    np.testing.assert_allclose(x._data, x_end, rtol=0, atol=1e-9)
    st = opt.state[x]
    assert (st["func_evals"], st["n_iter"]) == (evals, iters)
    assert losses[0] == pytest.approx(446.2, rel=1e-14)     # (the loss at X0)
    assert losses == sorted(losses, reverse=True)         # each step's first loss is no larger


@pytest.mark.parametrize("opts", [c[0] for c in LBFGS_CASES] + [dict(line_search_fn="strong_wolfe", history_size=2,
                                                                         max_iter=4, max_eval=6)],
                         ids=[str(c[0]) for c in LBFGS_CASES] + ["small history, max_eval"])
def test_lbfgs_against_torch(torch64, opts):
    torch = torch64
    x, opt, losses = _lbfgs_run(tg, opts)
    xt, topt, tlosses = _lbfgs_run(torch, opts)
    np.testing.assert_allclose(x._data, xt.detach().numpy(), rtol=0, atol=1e-9)
    np.testing.assert_allclose(losses, tlosses, rtol=1e-9, atol=1e-12)
    st, tst = opt.state[x], topt.state[xt]
    assert sorted(st) == sorted(tst)
    for k in ("func_evals", "n_iter"):
        assert st[k] == tst[k]
    assert len(st["old_dirs"]) == len(tst["old_dirs"])
    np.testing.assert_allclose(st["d"]._data, tst["d"].numpy(), rtol=1e-6, atol=1e-9)


def test_lbfgs_first_steps_exact_against_torch(torch64):
    """The first steps, before round-off has been amplified: to 1e-12."""
    torch = torch64
    for ls in (None, "strong_wolfe"):
        x, _, losses = _lbfgs_run(tg, dict(line_search_fn=ls, max_iter=5), steps=2)
        xt, _, tlosses = _lbfgs_run(torch, dict(line_search_fn=ls, max_iter=5), steps=2)
        np.testing.assert_allclose(x._data, xt.detach().numpy(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(losses, tlosses, rtol=1e-13)


def test_lbfgs_quadratic_converges_and_stops():
    A = np.array([[3.0, 1.0], [1.0, 2.0]])
    b = np.array([1.0, -1.0])
    x = tg.zeros(2, requires_grad=True)
    opt = optim.LBFGS([x], line_search_fn="strong_wolfe", tolerance_grad=1e-5)

    def closure():
        opt.zero_grad()
        loss = 0.5 * (x @ tg.tensor(A) @ x) - tg.tensor(b) @ x
        loss.backward()
        return loss

    opt.step(closure)
    np.testing.assert_allclose(x._data, np.linalg.solve(A, b), rtol=1e-6)
    evals, iters = opt.state[x]["func_evals"], opt.state[x]["n_iter"]
    before = x._data.copy()
    opt.step(closure)       # the gradient is below tolerance_grad: one evaluation, no iteration
    assert opt.state[x]["func_evals"] == evals + 1 and opt.state[x]["n_iter"] == iters
    np.testing.assert_array_equal(x._data, before)


def test_lbfgs_several_parameters_and_no_grad():
    """Parameters are one flat vector; one without a gradient counts as zeros."""
    a = tg.tensor([[-1.2, 1.0]], requires_grad=True)
    b = tg.tensor([0.5, -0.3, 2.0], requires_grad=True)
    unused = tg.tensor([7.0], requires_grad=True)
    opt = optim.LBFGS([a, unused, b], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = _rosenbrock(tg.cat([a.reshape(-1), b]))
        loss.backward()
        return loss

    for _ in range(15):
        opt.step(closure)
    x, _, _ = _lbfgs_run(tg, dict(line_search_fn="strong_wolfe"))
    np.testing.assert_allclose(tg.cat([a.reshape(-1), b]).detach().numpy(), x._data, rtol=0, atol=1e-12)
    assert unused.item() == 7.0
    assert list(opt.state) == [a]


def test_lbfgs_errors_and_state_dict():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.LBFGS([x], line_search_fn="wolfe")

    def closure():
        opt.zero_grad()
        loss = (x * x).sum()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="^only 'strong_wolfe' is supported$"):
        opt.step(closure)
    with pytest.raises(TypeError):
        optim.LBFGS([x]).step()                 # the closure is required
    # state_dict: a fresh optimizer continues where the saved one was
    x1, o1, _ = _lbfgs_run(tg, dict(line_search_fn="strong_wolfe", max_iter=3), steps=2)
    sd = copy.deepcopy(o1.state_dict())
    x2 = tg.tensor(x1._data.copy(), requires_grad=True)
    o2 = optim.LBFGS([x2], line_search_fn="strong_wolfe", max_iter=3)
    o2.load_state_dict(sd)

    def c2():
        o2.zero_grad()
        loss = _rosenbrock(x2)
        loss.backward()
        return loss

    def c1():
        o1.zero_grad()
        loss = _rosenbrock(x1)
        loss.backward()
        return loss

    with warnings.catch_warnings():
        warnings.simplefilter("error")          # (no warning about a tensor that requires grad)
        o1.step(c1)
        o2.step(c2)
    np.testing.assert_array_equal(x1._data, x2._data)
