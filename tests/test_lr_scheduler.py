"""tg.optim.lr_scheduler: the rates (and cycled momenta) PyTorch computes, to the bit,
state_dict keys and round trips, step(epoch), warnings and errors."""
import copy
import pickle
import warnings

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.optim import lr_scheduler as L

# (scheduler built on SGD(lr=0.1, momentum=0.9) as ``o``, the rate after construction and
# after each of 10 steps): PyTorch 2.13's values, printed to 15 significant digits
REFERENCE = [
    ("StepLR(o, 3, gamma=0.5)",
     [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125, 0.0125]),
    ("MultiStepLR(o, [2, 5, 5], gamma=0.3)",
     [0.1, 0.1, 0.03, 0.03, 0.03, 0.0027, 0.0027, 0.0027, 0.0027, 0.0027, 0.0027]),
    ("ExponentialLR(o, 0.9)",
     [0.1, 0.09, 0.081, 0.0729, 0.06561, 0.059049, 0.0531441, 0.04782969, 0.043046721, 0.0387420489,
      0.03486784401]),
    ("CosineAnnealingLR(o, 4, eta_min=0.001)",
     [0.1, 0.0855017856687341, 0.0505, 0.0154982143312659, 0.001, 0.0154982143312659, 0.0505, 0.0855017856687341,
      0.1, 0.0855017856687341, 0.0505]),
    ("CosineAnnealingWarmRestarts(o, 3, T_mult=2, eta_min=0.01)",
     [0.1, 0.0775, 0.0325, 0.1, 0.0939711431702998, 0.0775, 0.055, 0.0325, 0.0160288568297003, 0.1,
      0.0984666621830081]),
    ("LambdaLR(o, lambda e: 1 / (e + 1))",
     [0.1, 0.05, 0.0333333333333333, 0.025, 0.02, 0.0166666666666667, 0.0142857142857143, 0.0125,
      0.0111111111111111, 0.01, 0.00909090909090909]),
    ("MultiplicativeLR(o, lambda e: 0.95)",
     [0.1, 0.095, 0.09025, 0.0857375, 0.081450625, 0.07737809375, 0.0735091890625, 0.069833729609375,
      0.0663420431289062, 0.0630249409724609, 0.0598736939238379]),
    ("LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=6)",
     [0.025, 0.0358333333333333, 0.0466666666666667, 0.0575, 0.0683333333333333, 0.0791666666666667, 0.09, 0.09,
      0.09, 0.09, 0.09]),
    ("ConstantLR(o, factor=0.5, total_iters=4)",
     [0.05, 0.05, 0.05, 0.05, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]),
    ("PolynomialLR(o, total_iters=8, power=2.0)",
     [0.1, 0.0765625, 0.05625, 0.0390625, 0.025, 0.0140625, 0.00625, 0.0015625, 0.0, 0.0, 0.0]),
    ("OneCycleLR(o, 1.0, total_steps=10)",
     [0.04, 0.52, 1.0, 0.950484632013474, 0.811745653949763, 0.611262021936289, 0.388741978063711,
      0.188258346050237, 0.0495193679865263, 4e-06, 0.0495193679865262]),
    ("CyclicLR(o, 0.01, 0.1, step_size_up=4, step_size_down=3)",
     [0.01, 0.0325, 0.055, 0.0775, 0.1, 0.07, 0.04, 0.01, 0.0325, 0.055, 0.0775]),
    ("SequentialLR(o, [LinearLR(o, 0.1, total_iters=3), ExponentialLR(o, 0.9)], [4])",
     [0.01, 0.04, 0.07, 0.1, 0.1, 0.09, 0.081, 0.0729, 0.06561, 0.059049, 0.0531441]),
    ("ChainedScheduler([ConstantLR(o, 0.5, total_iters=3), ExponentialLR(o, 0.9)])",
     [0.05, 0.045, 0.0405, 0.0729, 0.06561, 0.059049, 0.0531441, 0.04782969, 0.043046721, 0.0387420489,
      0.03486784401]),
]
MOMENTA = {
    "OneCycleLR(o, 1.0, total_steps=10)":
        [0.95, 0.9, 0.85, 0.854951556604879, 0.868825509907063, 0.888873953302184, 0.911126046697816,
         0.931174490092937, 0.945048443395121, 0.95, 0.945048443395121],
    "CyclicLR(o, 0.01, 0.1, step_size_up=4, step_size_down=3)":
        [0.9, 0.875, 0.85, 0.825, 0.8, 0.833333333333333, 0.866666666666667, 0.9, 0.875, 0.85, 0.825],
}


def _sgd(lib=tg, groups=1):
    params = [lib.zeros(2, requires_grad=True) for _ in range(groups)]
    if groups == 1:
        return lib.optim.SGD(params, lr=0.1, momentum=0.9)
    return lib.optim.SGD([{"params": [p], "lr": 0.1 / (i + 1)} for i, p in enumerate(params)], lr=0.1, momentum=0.9)


def _build(expr, o, lib=None):
    names = dict(vars(L if lib is None else lib.optim.lr_scheduler))
    names["o"] = o
    return eval(expr, names)


@pytest.mark.parametrize("expr,expected", REFERENCE, ids=[r[0].split("(")[0] for r in REFERENCE])
def test_reference_rates(expr, expected):
    o = _sgd()
    s = _build(expr, o)
    lrs, moms = [s.get_last_lr()[0]], [o.param_groups[0]["momentum"]]
    for _ in range(10):
        o.step()
        s.step()
        lrs.append(s.get_last_lr()[0])
        moms.append(o.param_groups[0]["momentum"])
        assert o.param_groups[0]["lr"] == lrs[-1]
    np.testing.assert_allclose(lrs, expected, rtol=1e-14, atol=1e-18)
    if expr in MOMENTA:
        np.testing.assert_allclose(moms, MOMENTA[expr], rtol=1e-14)


SCHEDULES = [
    "StepLR(o, 3, gamma=0.5)",
    "MultiStepLR(o, [2, 5, 5, 9], gamma=0.3)",
    "ExponentialLR(o, 0.9)",
    "CosineAnnealingLR(o, 7, eta_min=0.001)",
    "CosineAnnealingWarmRestarts(o, 3, T_mult=2, eta_min=0.01)",
    "CosineAnnealingWarmRestarts(o, 4)",
    "LambdaLR(o, [lambda e: 0.9 ** e, lambda e: 1 / (e + 1)])",
    "MultiplicativeLR(o, lambda e: 0.95)",
    "LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=6)",
    "ConstantLR(o, factor=0.5, total_iters=4)",
    "PolynomialLR(o, total_iters=8, power=2.0)",
    "OneCycleLR(o, [1.0, 0.5], total_steps=31)",
    "OneCycleLR(o, 1.0, epochs=3, steps_per_epoch=11, three_phase=True, anneal_strategy='linear')",
    "OneCycleLR(o, 1.0, total_steps=40, cycle_momentum=False, pct_start=0.5)",
    "CyclicLR(o, 0.01, 0.1, step_size_up=4, step_size_down=3)",
    "CyclicLR(o, [0.01, 0.02], 0.1, step_size_up=3, mode='triangular2')",
    "CyclicLR(o, 0.01, 0.1, step_size_up=3, mode='exp_range', gamma=0.9)",
    "CyclicLR(o, 0.01, 0.1, step_size_up=2, scale_fn=lambda x: 0.5 ** x, scale_mode='iterations')",
    "SequentialLR(o, [LinearLR(o, 0.1, total_iters=3), ExponentialLR(o, 0.9), CosineAnnealingLR(o, 5)], [4, 9])",
    "ChainedScheduler([ConstantLR(o, 0.5, total_iters=3), ExponentialLR(o, 0.9)])",
    "ChainedScheduler([StepLR(o, 2), CosineAnnealingLR(o, 10)], optimizer=o)",
]


@pytest.mark.parametrize("kind", ["SGD", "Adam"])
@pytest.mark.parametrize("expr", SCHEDULES, ids=[s.split("(")[0] + str(i) for i, s in enumerate(SCHEDULES)])
def test_against_torch(kind, expr):
    """30 steps on two parameter groups: the same rates (==), momenta or betas, and
    state_dict keys."""
    torch = pytest.importorskip("torch")

    def build(lib):
        a, b = lib.zeros(2, requires_grad=True), lib.zeros(3, requires_grad=True)
        kw = dict(lr=0.1, momentum=0.9) if kind == "SGD" else dict(lr=0.1)
        o = getattr(lib.optim, kind)([{"params": [a]}, {"params": [b], "lr": 0.05}], **kw)
        return o, _build(expr, o, lib)

    (o, s), (to, ts) = build(tg), build(torch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(30):
            for opt, sch in ((o, s), (to, ts)):
                opt.step()
                sch.step()
            assert s.get_last_lr() == ts.get_last_lr()
            for g, tgroup in zip(o.param_groups, to.param_groups):
                assert g["lr"] == tgroup["lr"]
                assert g.get("momentum") == tgroup.get("momentum") and g.get("betas") == tgroup.get("betas")
    assert list(s.state_dict()) == list(ts.state_dict())
    assert getattr(s, "last_epoch", None) == getattr(ts, "last_epoch", None)
    assert set(o.param_groups[0]) - {"params"} == set(to.param_groups[0]) - {
        "params", "foreach", "fused", "differentiable", "capturable"}


@pytest.mark.parametrize("mode,threshold_mode", [("min", "rel"), ("max", "abs"), ("min", "abs"), ("max", "rel")])
def test_reduce_on_plateau(mode, threshold_mode):
    metrics = [5, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2.00001, 1.99999]
    sign = 1 if mode == "min" else -1
    expected = [1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.125, 0.125, 0.125,
                0.125, 0.0625, 0.0625, 0.0625, 0.0625]

    def run(lib):
        o = lib.optim.SGD([lib.zeros(2, requires_grad=True)], lr=1.0)
        s = lib.optim.lr_scheduler.ReduceLROnPlateau(o, mode=mode, factor=0.5, patience=2,
                                                     threshold_mode=threshold_mode, cooldown=1, min_lr=0.05)
        out = []
        for m in metrics:
            s.step(lib.tensor(sign * m) if lib is tg else sign * m)
            out.append(s.get_last_lr()[0])
        return s, out

    s, out = run(tg)
    if (mode, threshold_mode) in (("min", "rel"), ("max", "abs")):
        assert out[:20] == expected[:20]
    assert min(out) >= 0.05
    try:
        import torch
    except ImportError:
        return
    ts, tout = run(torch)
    assert out == tout
    assert list(s.state_dict()) == list(ts.state_dict())
    assert (s.best, s.num_bad_epochs, s.cooldown_counter) == (ts.best, ts.num_bad_epochs, ts.cooldown_counter)


def test_reduce_on_plateau_min_lr_per_group_and_errors():
    o = _sgd(groups=2)
    s = L.ReduceLROnPlateau(o, factor=0.1, patience=0, min_lr=[0.01, 0.0])
    s.step(1.0)
    s.step(2.0)
    assert s.get_last_lr() == [0.1 * 0.1, 0.05 * 0.1]     # (0.1 * 0.1 > 0.01 by an ulp)
    with pytest.raises(ValueError, match="^Factor should be < 1.0.$"):
        L.ReduceLROnPlateau(o, factor=1.0)
    with pytest.raises(ValueError, match="^expected 2 min_lrs, got 1$"):
        L.ReduceLROnPlateau(o, min_lr=[0.1])
    with pytest.raises(ValueError, match="^mode avg is unknown!$"):
        L.ReduceLROnPlateau(o, mode="avg")
    with pytest.raises(ValueError, match="^threshold mode x is unknown!$"):
        L.ReduceLROnPlateau(o, threshold_mode="x")
    o.add_param_group({"params": [tg.zeros(1, requires_grad=True)]})
    with pytest.raises(RuntimeError, match=r"^The number of param groups in the `optimizer` \(3\) differs"):
        s.step(5.0)
        s.step(5.0)


@pytest.mark.parametrize("expr", SCHEDULES, ids=[s.split("(")[0] + str(i) for i, s in enumerate(SCHEDULES)])
def test_state_dict_round_trip(expr):
    """A scheduler and optimizer made afresh and loaded from state dicts taken at step 7
    continue exactly as the uninterrupted pair."""
    def make():
        o = _sgd(groups=2)
        return o, _build(expr, o)

    o, s = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(7):
            o.step()
            s.step()
        sd_o = copy.deepcopy(o.state_dict())
        sd_s = s.state_dict()
        if "lambda" not in expr:
            sd_s = pickle.loads(pickle.dumps(sd_s))     # (saveable: no functions in it)
        full = []
        for _ in range(8):
            o.step()
            s.step()
            full.append(s.get_last_lr())
        o2, s2 = make()
        o2.load_state_dict(sd_o)
        s2.load_state_dict(sd_s)
        resumed = []
        for _ in range(8):
            o2.step()
            s2.step()
            resumed.append(s2.get_last_lr())
    assert resumed == full


def test_lambda_state_dict_keeps_callable_objects():
    class Decay:
        def __init__(self, rate):
            self.rate = rate

        def __call__(self, epoch):
            return self.rate ** epoch

    o = _sgd()
    s = L.LambdaLR(o, Decay(0.5))
    sd = s.state_dict()
    assert sd["lr_lambdas"] == [{"rate": 0.5}]
    s2 = L.LambdaLR(_sgd(), Decay(0.9))
    s2.load_state_dict(sd)
    assert s2.lr_lambdas[0].rate == 0.5
    assert L.LambdaLR(_sgd(), lambda e: 1.0).state_dict()["lr_lambdas"] == [None]


def test_closed_form_with_epoch_argument():
    o = _sgd()
    s = L.StepLR(o, 3, gamma=0.5)
    o.step()
    with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)` was not necessary"):
        s.step(7)
    assert s.get_last_lr() == [0.025] and s.last_epoch == 7
    o = _sgd()
    s = L.CosineAnnealingWarmRestarts(o, 2, T_mult=2)
    s.step(3.5)           # (a fractional epoch: in the second period, of length 4)
    assert s.T_i == 4 and s.T_cur == 1.5 and s.last_epoch == 3
    np.testing.assert_allclose(s.get_last_lr(), [0.05 * (1 + np.cos(np.pi * 1.5 / 4))], rtol=1e-15)
    with pytest.raises(ValueError, match="^Expected non-negative epoch, but got -1$"):
        s.step(-1)


def test_warnings():
    o = _sgd()
    s = L.ExponentialLR(o, 0.5)
    with pytest.warns(UserWarning, match="Detected call of `lr_scheduler.step\\(\\)` before `optimizer.step\\(\\)`"):
        s.step()
    o = _sgd()
    s = L.ExponentialLR(o, 0.5)
    o.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.step()                      # (the right order: no warning)
    with pytest.warns(UserWarning, match="^To get the last learning rate computed by the scheduler, please use "
                                         "`get_last_lr\\(\\)`.$"):
        s.get_lr()
    # the optimizer's step is wrapped once, however many schedulers watch it
    L.StepLR(o, 2)
    assert o.step._wrapped_by_lr_sched is True and o.step.__wrapped__ is type(o).step


def test_errors():
    o = _sgd()
    with pytest.raises(TypeError, match="^int is not an Optimizer$"):
        L.StepLR(3, 2)
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified in param_groups\\[0\\]"):
        L.StepLR(o, 2, last_epoch=3)
    with pytest.raises(ValueError, match="^Expected 1 lr_lambdas, but got 2$"):
        L.LambdaLR(o, [lambda e: 1, lambda e: 2])
    with pytest.raises(TypeError, match="^lr_lambda should be a function, but got int$"):
        L.LambdaLR(o, 3)
    with pytest.raises(ValueError, match="^Constant multiplicative factor expected to be between 0 and 1.$"):
        L.ConstantLR(o, factor=2.0)
    with pytest.raises(ValueError, match="^Starting multiplicative factor expected to be greater than 0"):
        L.LinearLR(o, start_factor=0)
    with pytest.raises(ValueError, match="^Expected positive integer T_0, but got 0$"):
        L.CosineAnnealingWarmRestarts(o, 0)
    with pytest.raises(ValueError, match="^Expected integer T_mult >= 1, but got 1.5$"):
        L.CosineAnnealingWarmRestarts(o, 2, T_mult=1.5)
    with pytest.raises(ValueError, match="^You must define either total_steps OR \\(epochs AND steps_per_epoch\\)$"):
        L.OneCycleLR(o, 1.0)
    with pytest.raises(ValueError, match="^Expected float between 0 and 1 pct_start, but got 1$"):
        L.OneCycleLR(o, 1.0, total_steps=5, pct_start=1)
    with pytest.raises(ValueError, match="^anneal_strategy must be one of 'cos' or 'linear', instead got exp$"):
        L.OneCycleLR(o, 1.0, total_steps=5, anneal_strategy="exp")
    with pytest.raises(ValueError, match="^max_lr must have the same length as optimizer.param_groups. max_lr has "
                                         "2 values, param_groups has 1.$"):
        L.OneCycleLR(o, [1.0, 2.0], total_steps=5)
    s = L.OneCycleLR(_sgd(), 1.0, total_steps=2)
    s.optimizer.step()
    s.step()
    s.step()
    with pytest.raises(ValueError, match="^Tried to step 3 times. The specified number of total steps is 2$"):
        s.step()
    with pytest.raises(ValueError, match="^mode is invalid and scale_fn is None$"):
        L.CyclicLR(_sgd(), 0.1, 1.0, mode="sine")
    rms = tg.optim.Adagrad([tg.zeros(1, requires_grad=True)])
    with pytest.raises(ValueError, match="^optimizer must support momentum or beta1 with `cycle_momentum`"):
        L.CyclicLR(rms, 0.1, 1.0)
    with pytest.raises(ValueError, match="^SequentialLR expects at least one scheduler, but got no scheduler.$"):
        L.SequentialLR(o, [], [])
    with pytest.raises(ValueError, match="^Sequential Schedulers expects number of schedulers provided to be one "
                                         "more than the number of milestone points"):
        L.SequentialLR(o, [L.StepLR(o, 2)], [3])
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau` scheduler"):
        L.ChainedScheduler([L.ReduceLROnPlateau(o)])
    with pytest.raises(ValueError, match="expects all schedulers to belong to the same optimizer"):
        L.ChainedScheduler([L.StepLR(o, 2), L.StepLR(_sgd(), 2)])
    with pytest.raises(ValueError, match="^ChainedScheduler expects at least one scheduler to be chained"):
        L.ChainedScheduler([])


def test_error_messages_are_torchs():
    torch = pytest.importorskip("torch")
    cases = ["ConstantLR(o, factor=2.0)", "CosineAnnealingWarmRestarts(o, 2, T_mult=1.5)",
             "OneCycleLR(o, [1.0, 2.0], total_steps=5)", "OneCycleLR(o, 1.0, total_steps=5, pct_start=1)",
             "SequentialLR(o, [StepLR(o, 2)], [3])", "ReduceLROnPlateau(o, mode='avg')",
             "ChainedScheduler([StepLR(o, 2), StepLR(o2, 2)])"]
    for expr in cases:
        msgs = []
        for lib in (tg, torch):
            o, o2 = _sgd(lib), _sgd(lib)
            names = dict(vars(lib.optim.lr_scheduler), o=o, o2=o2)
            with pytest.raises(ValueError) as e:
                eval(expr, names)
            msgs.append(str(e.value).replace("tapegrad.optim", "torch.optim"))
        if "ChainedScheduler" in expr:      # (it names the optimizer's repr, which differs)
            msgs = [m.split(" has ")[0] for m in msgs]
        assert msgs[0] == msgs[1], expr


def test_scheduler_drives_training():
    """A schedule changes what the optimizer does: SGD on (p - 3)^2 with StepLR."""
    p = tg.zeros(1, requires_grad=True)
    opt = tg.optim.SGD([p], lr=0.25)
    sched = L.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        opt.zero_grad()
        ((p - 3) ** 2).sum().backward()
        opt.step()
        sched.step()
    # steps of 0.25, 0.125, 0.0625 times the gradient 2 (p - 3)
    x = 0.0
    for lr in (0.25, 0.125, 0.0625):
        x -= lr * 2 * (x - 3)
    assert p.item() == pytest.approx(x, rel=1e-15)
    assert sched.get_last_lr() == [0.03125]
