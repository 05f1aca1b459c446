"""grad(create_graph=True) of a scalar as one grad_of entry per input (autograd/grad_entry.py):
after the op-by-op path has served a tape structure, the entry gives the same gradients,
grad_fn names and requires_grad, and the same second derivatives, by the compiled program."""
import os

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import grad_entry as GE
from tapegrad.autograd import tangent_program as TP

RNG = np.random.default_rng(5)

pytestmark = pytest.mark.skipif(os.environ.get("TAPEGRAD_INTERPRET") == "always",
                                reason="the gradient entry serves compiled backward passes only")


@pytest.fixture(autouse=True)
def forced(monkeypatch):
    from tapegrad import _jit
    _jit.load()             # (the entry serves compiled backward passes only)
    monkeypatch.setattr(GE, "OBSERVE", 1)
    monkeypatch.setattr(TP, "MODE", ["now"])
    monkeypatch.setattr(TP, "COMPILE_AFTER", 1)
    monkeypatch.setattr(GE, "_OBSERVED", {})
    # a fresh tape: entries an earlier test left on the thread's tape (an error before its
    # backward) would make this test's first call a structure of its own (keys are absolute)
    from tapegrad.core import tape
    tape.rotate()


def rosen(x):
    h = x[:-1]
    return (100 * (x[1:] - h ** 2) ** 2 + (1 - h) ** 2).sum()


def two_inputs(x, w):
    return (tg.sin(x * w) ** 2).sum() + (x * x * w).sum() + w.exp().sum()


def _double_backward(f, arrays, vs):
    xs = [tg.tensor(a, requires_grad=True) for a in arrays]
    y = f(*xs)
    gs = tg.autograd.grad(y, xs, create_graph=True)
    s = sum((g * tg.tensor(v)).sum() for g, v in zip(gs, vs))
    s.backward()
    return y.item(), [g.detach().numpy() for g in gs], [g.grad_fn.name() for g in gs], [x.grad.numpy() for x in xs]


@pytest.mark.parametrize("f, n_in", [(rosen, 1), (two_inputs, 2)], ids=["rosen", "two inputs"])
def test_same_as_op_by_op(f, n_in):
    arrays = [RNG.standard_normal(50) for _ in range(n_in)]
    vs = [RNG.standard_normal(50) for _ in range(n_in)]
    served = GE.SERVED[0]
    first = _double_backward(f, arrays, vs)      # op by op, observed
    assert GE.SERVED[0] == served
    runs = TP.RUNS[0]
    again = [_double_backward(f, arrays, vs) for _ in range(2)]
    assert GE.SERVED[0] == served + 2, "the entry did not serve"
    # per call, one program run gives the gradients and one per gradient its second backward
    assert TP.RUNS[0] == runs + 2 * (1 + n_in)
    for got in again:
        assert got[0] == first[0]
        assert got[2] == first[2]               # grad_fn names
        for a, b in zip(got[1], first[1]):
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)
        for a, b in zip(got[3], first[3]):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


def test_third_derivative_goes_op_by_op():
    """create_graph through the entry's reverse: the op-by-op gradient, differentiable again."""
    x0 = np.array([0.3, -0.7, 1.1])

    def third(x0):
        x = tg.tensor(x0, requires_grad=True)
        g, = tg.autograd.grad((x ** 4).sum(), x, create_graph=True)
        h, = tg.autograd.grad((g * g).sum(), x, create_graph=True)
        t, = tg.autograd.grad(h.sum(), x)
        return g.detach().numpy(), h.detach().numpy(), t.numpy()
    for _ in range(3):
        g, h, t = third(x0)
        np.testing.assert_allclose(g, 4 * x0 ** 3, rtol=1e-14)
        np.testing.assert_allclose(h, 2 * (4 * x0 ** 3) * 12 * x0 ** 2, rtol=1e-13)     # d/dx (16 x^6)
        np.testing.assert_allclose(t, 96 * 5 * x0 ** 4, rtol=1e-12)


def test_linear_and_unused_inputs():
    """A gradient that does not depend on the inputs (requires_grad False) comes out as op
    by op; an input the output does not reach (None with allow_unused) keeps the op-by-op
    path (a gap: it is not on the tape)."""
    def call(unused):
        x, w, u = (tg.tensor(np.arange(3.0) + 1, requires_grad=True) for _ in range(3))
        y = (x * 3.0).sum() + (w * w).sum()
        return tg.autograd.grad(y, [x, w, u] if unused else [x, w], create_graph=True, allow_unused=True)
    served = GE.SERVED[0]
    for k in range(6):
        gx, gw, *gu = call(k >= 3)
        assert gu in ([], [None])
        assert not gx.requires_grad and gw.requires_grad
        np.testing.assert_array_equal(gx.numpy(), [3.0, 3.0, 3.0])
        np.testing.assert_array_equal(gw.detach().numpy(), [2.0, 4.0, 6.0])
        runs = TP.RUNS[0]
        gw.sum().backward()
        assert TP.RUNS[0] == runs + (k in (1, 2))     # (w's program, where served)
    assert GE.SERVED[0] == served + 2


def test_a_value_changed_in_place_raises_as_op_by_op():
    def call(change):
        x = tg.tensor([0.5, 1.5], requires_grad=True)
        e = x.exp()
        g, = tg.autograd.grad((e * e).sum(), x, create_graph=True)
        if change:
            with tg.no_grad():
                e.mul_(2.0)
        return g
    served = GE.SERVED[0]
    for _ in range(2):
        call(False).sum().backward()
    assert GE.SERVED[0] == served + 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        call(True).sum().backward()
    assert GE.SERVED[0] == served + 2


def test_a_value_changed_in_place_before_the_gradient_raises():
    """Served or not, ``grad`` itself raises when a value its backward reads changed."""
    def call(change):
        x = tg.tensor([0.5, 1.5], requires_grad=True)
        e = x.exp()
        y = (e * e).sum()
        if change:
            with tg.no_grad():
                e.mul_(2.0)
        return tg.autograd.grad(y, x, create_graph=True)[0]
    served = GE.SERVED[0]
    for _ in range(2):
        g = call(False)
        np.testing.assert_allclose(g.detach().numpy(), 2 * np.exp(2 * np.array([0.5, 1.5])), rtol=1e-14)
        g.sum().backward()
    assert GE.SERVED[0] == served + 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        call(True)
    assert GE.SERVED[0] == served + 1


@pytest.mark.parametrize("case", ["hook", "anomaly", "retain_graph=False", "two outputs", "grad_outputs"])
def test_what_the_entry_leaves_to_the_op_by_op_path(case):
    """Hooks, anomaly mode, retain_graph=False, several outputs and given grad_outputs keep the
    op-by-op path, with its values."""
    x0, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 2.0, -1.0])

    def call():
        x = tg.tensor(x0, requires_grad=True)
        if case == "hook":
            x.register_hook(lambda g: g * 2.0)
        y = (x ** 3).sum()
        kw = {"create_graph": True}
        if case == "retain_graph=False":
            kw["retain_graph"] = False
        outs = [y, (x * x).sum()] if case == "two outputs" else y
        if case == "grad_outputs":
            kw["grad_outputs"] = tg.tensor(1.0)
        with tg.autograd.set_detect_anomaly(case == "anomaly"):
            g, = tg.autograd.grad(outs, x, **kw)
            (g * tg.tensor(v)).sum().backward()
        return g.detach().numpy(), x.grad.numpy()
    served = GE.SERVED[0]
    for _ in range(3):
        g, h = call()
        scale = 2.0 if case == "hook" else 1.0
        extra = 2 * x0 if case == "two outputs" else 0.0
        np.testing.assert_allclose(g, scale * (3 * x0 ** 2 + extra), rtol=1e-14)
        np.testing.assert_allclose(h, scale * (6 * x0 + (2.0 if case == "two outputs" else 0.0)) * v * scale,
                                   rtol=1e-13)
    assert GE.SERVED[0] == served


def _fuzz_double_backward(b, vs, w):
    """Double backward of ``sum(f * w)`` of a fuzzer program along ``vs``: the gradients'
    values, grad_fn names and requires_grad, and the second derivatives."""
    xs = b.inputs()
    y = (b.f(*xs) * w).sum()
    gs = tg.autograd.grad(y, xs, create_graph=True, allow_unused=True)
    terms = [(g * tg.tensor(v)).sum() for g, v in zip(gs, vs) if g is not None and g.requires_grad]
    if terms:
        sum(terms[1:], terms[0]).backward()
    return ([None if g is None else g.detach().numpy().copy() for g in gs],
            [None if g is None or g.grad_fn is None else g.grad_fn.name() for g in gs],
            [None if g is None else g.requires_grad for g in gs],
            [None if x.grad is None else x.grad.numpy().copy() for x in xs])


def test_fuzzer_programs_same_as_op_by_op():
    """Random programs of the fuzzer (tests/test_fuzz.py, without kinks): the served double
    backward equals the op-by-op one (values, grad_fn names, requires_grad, second
    derivatives), and the entry serves most of them by the third call."""
    from test_fuzz import RandomSource, _program
    served = tried = 0
    for seed in range(10):
        b = _program(RandomSource(1000 + seed), kinks=False, max_leaves=2, max_numel=8, max_ops=20, record=False)
        rng = np.random.default_rng(seed)
        xs = b.inputs()
        out = b.f(*xs)
        w = tg.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(out.shape))
        vs = [rng.standard_normal(tuple(x.shape)) for x in xs]
        before = GE.SERVED[0]
        first = _fuzz_double_backward(b, vs, w)        # op by op, observed
        assert GE.SERVED[0] == before
        # (the setup's forward above is on the first call's tape: its structure is another)
        _fuzz_double_backward(b, vs, w)
        again = _fuzz_double_backward(b, vs, w)
        tried += 1
        served += GE.SERVED[0] - before
        msg = "\n" + b.listing()
        assert again[1] == first[1] and again[2] == first[2], msg
        for part in (0, 3):
            for p, q in zip(again[part], first[part]):
                assert (p is None) == (q is None), msg
                if p is not None:
                    np.testing.assert_allclose(p, q, rtol=1e-10, atol=1e-12, err_msg=msg)
    assert served >= tried // 2, (served, tried)


def test_a_tape_longer_than_a_program_keeps_the_op_by_op_path():
    """Past the programs' entries (``tangent_program.MAX_ENTRIES``) no structure is observed:
    its key would be the whole tape."""
    def call():
        x = tg.tensor([0.1, 0.2], requires_grad=True)
        y = x
        for _ in range(TP.MAX_ENTRIES // 2 + 1):
            y = (y * 0.5).sin()
        g, = tg.autograd.grad(y.sum(), x, create_graph=True)
        g.sum().backward()
        return g.detach().numpy(), x.grad.numpy()
    served = GE.SERVED[0]
    first = call()
    for _ in range(2):
        again = call()
        np.testing.assert_array_equal(again[0], first[0])
        np.testing.assert_array_equal(again[1], first[1])
    assert GE.SERVED[0] == served and not GE._OBSERVED
    assert np.all(np.isfinite(first[1])) and np.all(first[0] != 0)


def test_a_served_gradient_leads_to_its_inputs():
    """The one difference a user can see (docs/differences.md): a served gradient has op by
    op's grad_fn name, but its next_functions lead straight to the inputs it depends on."""
    def call():
        x = tg.tensor([0.3, 0.5, 0.9], requires_grad=True)
        w = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
        gx, gw = tg.autograd.grad((x * x * w).sum(), [x, w], create_graph=True)
        nexts = [[(None if n is None else n.name(), getattr(n, "variable", None)) for n, _ in g.grad_fn.next_functions]
                 for g in (gx, gw)]
        (gx.sum() + gw.sum()).backward()
        return x, w, [gx.grad_fn.name(), gw.grad_fn.name()], nexts
    served = GE.SERVED[0]
    _, _, names, nexts = call()
    assert GE.SERVED[0] == served
    assert names == ["AddBackward0", "MulBackward0"]
    assert [n for n, _ in nexts[0]] == ["MulBackward0", "MulBackward0"]
    x, w, names2, nexts2 = call()
    assert GE.SERVED[0] == served + 1
    assert names2 == names
    acc = "torch::autograd::AccumulateGrad"
    assert [n for n, _ in nexts2[0]] == [acc, acc] and {id(v) for _, v in nexts2[0]} == {id(x), id(w)}
    assert nexts2[1] == [(acc, x)]
    np.testing.assert_allclose(x.grad.numpy(), 2 * w.detach().numpy() + 2 * x.detach().numpy())
    np.testing.assert_allclose(w.grad.numpy(), 2 * x.detach().numpy())


def test_the_original_graph_outlives_a_backward_through_a_served_gradient():
    """Documented (docs/differences.md): op by op, a backward through the gradient without
    retain_graph frees the original graph's values too (PyTorch's error after it); a served
    gradient's backward frees its own entry only, and the original graph gives its gradient."""
    def call():
        x = tg.tensor([0.3, 0.5, 0.9], requires_grad=True)
        loss = (x.exp() * x).sum()
        g, = tg.autograd.grad(loss, x, create_graph=True)
        (g * 2.0).sum().backward()
        hv = x.grad.numpy().copy()
        try:
            loss.backward()
        except RuntimeError as e:
            assert "backward through the graph a second time" in str(e)
            return hv, None
        return hv, x.grad.numpy() - hv
    x0 = np.array([0.3, 0.5, 0.9])
    served = GE.SERVED[0]
    hv, second = call()
    assert second is None and GE.SERVED[0] == served
    for _ in range(2):
        hv2, grad = call()
        np.testing.assert_allclose(hv2, hv, rtol=1e-14)
        np.testing.assert_allclose(hv2, 2 * np.exp(x0) * (x0 + 2), rtol=1e-14)
        np.testing.assert_allclose(grad, np.exp(x0) * (x0 + 1), rtol=1e-14)
    assert GE.SERVED[0] == served + 2


def test_a_served_gradient_changed_in_place_or_differentiated_twice():
    """A served gradient keeps no value of its own: changed in place, its backward gives op
    by op's values; a second backward through it without retain_graph works, where op by op
    raises as PyTorch does (docs/differences.md)."""
    x0 = np.array([0.3, 0.5, 0.9])

    def call(twice):
        x = tg.tensor(x0, requires_grad=True)
        g, = tg.autograd.grad((x ** 3).sum(), x, create_graph=True)
        if not twice:
            g.mul_(2.0)
            g.sum().backward()
            return x.grad.numpy()
        g.sum().backward()
        try:
            g.sum().backward()
        except RuntimeError as e:
            assert "backward through the graph a second time" in str(e)
            return None
        return x.grad.numpy()
    for twice in (False, True):
        GE._OBSERVED.clear()        # (the same structure both times)
        served = GE.SERVED[0]
        first = call(twice)
        assert GE.SERVED[0] == served
        if twice:
            assert first is None
        else:
            np.testing.assert_allclose(first, 12 * x0, rtol=1e-14)
        for _ in range(2):
            np.testing.assert_allclose(call(twice), 12 * x0 if not twice else 2 * 6 * x0, rtol=1e-14)
        assert GE.SERVED[0] == served + 2


@pytest.mark.parametrize("on_arrays", [True, False], ids=["array reverse", "tensor reverse"])
def test_the_second_backward_takes_the_array_reverse(monkeypatch, on_arrays):
    """The compiled backward's stop at a served gradient runs its program on arrays, no
    tensors made (``array_reverse``); without it the tensor reverse gives the same."""
    from tapegrad.core.registry import index
    from tapegrad.ops import host as H
    k = index(GE._GRAD_OF.code)
    calls = []

    def spy(*args, **kw):
        calls.append(1)
        return GE._reverse(*args, **kw)
    op = H.HOST_OPS[k]
    assert op is GE._GRAD_OF
    monkeypatch.setitem(H.HOST_OPS, k, op._replace(reverse=spy, array_reverse=op.array_reverse if on_arrays else None))
    x0, v = RNG.standard_normal(40), RNG.standard_normal(40)
    served, want = GE.SERVED[0], None
    for _ in range(3):
        got = _double_backward(rosen, [x0], [v])[3][0]
        want = got if want is None else want
    assert GE.SERVED[0] == served + 2 and len(calls) == (0 if on_arrays else 2)
    h = x0[:-1]
    hv = np.zeros_like(x0)
    hv[:-1] = (1200 * h ** 2 - 400 * x0[1:] + 2) * v[:-1] - 400 * h * v[1:]
    hv[1:] += -400 * h * v[:-1] + 200 * v[1:]
    np.testing.assert_allclose(got, hv, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(want, hv, rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("n", [50, 3000], ids=["adjoints in the arena", "adjoints of their own"])
def test_every_path_adds_into_the_second_backwards_adjoints(n):
    """Both gradients' reverses reach x and w, and so do ops recorded after them: each
    adds in, whether the adjoints live in the backward's arena or are arrays of their
    own (past ``engine.BIG``; the first reverse's result then becomes the adjoint)."""
    from tapegrad.autograd import engine
    assert (n >= engine.BIG) == (n == 3000)
    arrays = [RNG.uniform(-1, 1, n) for _ in range(2)]
    v, u = RNG.standard_normal(n), RNG.standard_normal(n)

    def call():
        x, w = (tg.tensor(a, requires_grad=True) for a in arrays)
        gx, gw = tg.autograd.grad(two_inputs(x, w), [x, w], create_graph=True)
        ((gx * tg.tensor(v)).sum() + (gw * tg.tensor(u)).sum() + (x * w).sum()).backward()
        return x.grad.numpy(), w.grad.numpy()
    served = GE.SERVED[0]
    got = [call() for _ in range(3)]
    assert GE.SERVED[0] == served + 2
    # by hand: f = sum(sin(x w)^2) + sum(x^2 w) + sum(exp(w)), elementwise Hessian blocks
    x, w = arrays
    s2, c2 = np.sin(2 * x * w), np.cos(2 * x * w)
    fxx, fww = 2 * w * w * c2 + 2 * w, 2 * x * x * c2 + np.exp(w)
    fxw = s2 + 2 * x * w * c2 + 2 * x
    want = (fxx * v + fxw * u + w, fxw * v + fww * u + x)
    for gx, gw in got:
        np.testing.assert_allclose(gx, want[0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gw, want[1], rtol=1e-12, atol=1e-12)
