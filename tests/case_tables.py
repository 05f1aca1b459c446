"""The checks of a table of cases, made once here for every test file that has such a table.

``shape_tests``: ops linear in their inputs, run unchanged on tapegrad and on torch
(tests/test_shape_ops.py, tests/test_shape_ops2.py), below.
``functional_tests``: ``tg.nn.functional``'s cases (tests/test_nn_functional_layers.py,
tests/test_nn_activations_losses.py).  A table maps a case's name to ``(fn, specs, second)``: ``fn(F, *tensors)`` with ``F``
tapegrad's or torch's ``nn.functional``, ``specs`` the inputs as (shape, kind) (see
``inputs``), ``second`` whether gradgradcheck runs too.  ``EXPECTED`` holds PyTorch 2.13's
outputs of each case as ``checks`` summarises them, so that the values are checked where
torch is not installed; ``print_expected`` writes that table again.
"""
import pprint

import numpy as np
import pytest

import tapegrad as tg


def inputs(specs, seed=0):
    """Arrays for ``specs``: (shape, kind), kind "f" normal, "p" positive ("c", "q": the
    same, not differentiated), "i<n>" integers in [0, n) ("j<n>": the same as floats), "b" booleans
    (True mostly), "s" signs +-1."""
    rng = np.random.default_rng(seed)
    out = []
    for shape, kind in specs:
        if kind in ("f", "c"):
            out.append(rng.standard_normal(shape))
        elif kind in ("p", "q"):
            out.append(rng.uniform(0.5, 2.0, shape))
        elif kind.startswith("i"):
            out.append(rng.integers(0, int(kind[1:]), shape))
        elif kind.startswith("j"):
            out.append(rng.integers(0, int(kind[1:]), shape).astype(np.float64))
        elif kind == "b":
            out.append(rng.random(shape) > 0.3)
        elif kind == "s":
            out.append(np.where(rng.random(shape) > 0.5, 1.0, -1.0))
        else:
            raise ValueError(kind)
    return out


def checks(out):
    """An output as ``EXPECTED`` holds it: shape, the first six values, the sum of squares
    and a weighted sum (weights -3..3 repeating)."""
    flat = np.asarray(out, dtype=np.float64).reshape(-1)
    w = (np.arange(flat.size) % 7) - 3.0
    return list(out.shape), flat[:6].tolist(), float((flat * flat).sum()), float((flat * w).sum())


def differentiated(specs):
    return [kind in ("f", "p") for _, kind in specs]


def tg_inputs(arrays, specs):
    return [tg.tensor(a, requires_grad=d) for a, d in zip(arrays, differentiated(specs))]


def functional_tests(cases, expected, not_finite_differences=()):
    """The three tests of a table, made for the calling module (new functions per table:
    pytest's parametrize marks are attributes of the function):
    ``test_values_are_pytorchs`` (against ``expected``), ``test_values_and_gradients_match_torch``
    (values and input gradients through both reverses, torch installed) and ``test_gradcheck``
    (and gradgradcheck where the case says so), except the cases named in
    ``not_finite_differences``, whose gradient PyTorch defines otherwise."""
    F = tg.nn.functional

    @pytest.mark.parametrize("name", sorted(cases))
    def test_values_are_pytorchs(name):
        fn, specs, _ = cases[name]
        out = fn(F, *tg_inputs(inputs(specs), specs))
        shape, first, sq, weighted = expected[name]
        got = checks(out.detach().numpy())
        assert got[0] == shape
        np.testing.assert_allclose(got[1], first, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(got[2:], [sq, weighted], rtol=1e-12, atol=1e-12)

    @pytest.mark.parametrize("name", sorted(cases))
    def test_values_and_gradients_match_torch(name, reverse):
        torch = pytest.importorskip("torch")
        fn, specs, _ = cases[name]
        arrays = inputs(specs)
        tin = [torch.tensor(a, requires_grad=d) for a, d in zip(arrays, differentiated(specs))]
        gin = tg_inputs(arrays, specs)
        yt, yg = fn(torch.nn.functional, *tin), fn(F, *gin)
        assert tuple(yg.shape) == tuple(yt.shape)
        np.testing.assert_allclose(yg.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-13)
        g = np.random.default_rng(7).standard_normal(tuple(yt.shape))
        (yt * torch.tensor(g)).sum().backward()
        (yg * tg.tensor(g)).sum().backward()
        for a, b in zip(tin, gin):
            if a.requires_grad:
                np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-11, atol=1e-12)

    @pytest.mark.parametrize("name", sorted(set(cases) - set(not_finite_differences)))
    def test_gradcheck(name):
        fn, specs, second = cases[name]
        arrays = inputs(specs)
        diff = differentiated(specs)
        ints = {i: a for i, (a, d) in enumerate(zip(arrays, diff)) if not d}
        floats = [tg.tensor(a, requires_grad=True) for a, d in zip(arrays, diff) if d]

        def f(*fs):
            it = iter(fs)
            return fn(F, *[tg.tensor(ints[i]) if i in ints else next(it) for i in range(len(arrays))])
        assert tg.autograd.gradcheck(f, floats)
        if second:
            assert tg.autograd.gradgradcheck(f, floats)

    return test_values_are_pytorchs, test_values_and_gradients_match_torch, test_gradcheck


def print_expected(cases):
    """``EXPECTED`` of ``cases`` as source, from torch's values (torch installed)."""
    import torch
    print("EXPECTED = {")
    for name in sorted(cases):
        fn, specs, _ = cases[name]
        out = fn(torch.nn.functional, *[torch.tensor(a) for a in inputs(specs)])
        text = pprint.pformat(tuple(checks(out.numpy())), width=110, compact=True)
        print("    %r:\n        %s," % (name, text.replace("\n", "\n        ")))
    print("}")


# -- shape ops: functions of tensors run unchanged on tapegrad and on torch ----------------------
def outputs(r):
    """A case's outputs as a tuple (a tensor of either library is one output)."""
    return tuple(r) if isinstance(r, (tuple, list)) else (r,)


def shape_tests(cases, views=None, value_atol=1e-15, float32_tol=1e-6):
    """The four tests of a table ``name -> (f(module, *inputs), input shapes)`` of ops
    linear in their inputs (tests/test_shape_ops.py, tests/test_shape_ops2.py):
    ``test_gradcheck``, ``test_gradgradcheck`` (through a product with the inputs' sum),
    ``test_matches_torch`` (values, float64, and input gradients through both reverses; with
    ``views``, also each output's grad_fn name and whether it shares its input's memory, as
    torch's does, exactly for the cases named in ``views``) and ``test_float32_matches_torch``.
    ``case_inputs(cases, name)``: the inputs of a case."""

    @pytest.mark.parametrize("name", sorted(cases))
    def test_gradcheck(name):
        f = cases[name][0]
        xs = leaves(case_inputs(cases, name))
        assert tg.autograd.gradcheck(lambda *a: f(tg, *a), xs)

    @pytest.mark.parametrize("name", sorted(cases))
    def test_gradgradcheck(name):
        # a product with the inputs' sum: the linear ops' second derivative shows through it
        f = cases[name][0]
        xs = leaves(case_inputs(cases, name))

        def g(*a):
            s = a[0].sum()
            for t in a[1:]:
                s = s + t.sum()
            return tuple(o * s for o in outputs(f(tg, *a)))
        assert tg.autograd.gradgradcheck(g, xs)

    @pytest.mark.parametrize("name", sorted(cases))
    def test_matches_torch(name, reverse):
        torch = pytest.importorskip("torch")
        f = cases[name][0]
        values = case_inputs(cases, name)
        xs = leaves(values)
        ts = [torch.tensor(v, requires_grad=True) for v in values]
        outs, touts = outputs(f(tg, *xs)), outputs(f(torch, *ts))
        assert len(outs) == len(touts)
        rng = np.random.default_rng(1)
        loss, tloss = 0.0, 0.0
        for o, t in zip(outs, touts):
            assert o.shape == tuple(t.shape) and o.dtype == np.float64
            np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-13, atol=value_atol)
            if views is not None:
                assert (o.grad_fn and o.grad_fn.name()) == (t.grad_fn and type(t.grad_fn).__name__)
                if t.numel():       # a view of an input (or the input itself: atleast_1d of a vector)
                    shares = any(t.untyped_storage().data_ptr() == u.untyped_storage().data_ptr() for u in ts)
                    assert any(np.may_share_memory(o._data, x._data) for x in xs) == shares == (name in views)
            w = rng.standard_normal(o.shape)
            loss = loss + (o * tg.tensor(w)).sum()
            tloss = tloss + (t * torch.tensor(w)).sum()
        loss.backward()
        tloss.backward()
        for x, t in zip(xs, ts):
            if t.grad is None:      # (only the shape of view_as's, reshape_as's and expand_as's other is read)
                assert x.grad is None
                continue
            np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-13, atol=1e-14)

    @pytest.mark.parametrize("name", sorted(cases))
    def test_float32_matches_torch(name):
        torch = pytest.importorskip("torch")
        f = cases[name][0]
        values = [v.astype(np.float32) for v in case_inputs(cases, name)]
        xs = leaves(values)
        ts = [torch.tensor(v, requires_grad=True) for v in values]
        outs, touts = outputs(f(tg, *xs)), outputs(f(torch, *ts))
        for o, t in zip(outs, touts):
            assert o.dtype == np.float32 and str(t.dtype) == "torch.float32"
            np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=float32_tol, atol=float32_tol)
        sum(o.sum() for o in outs).backward()
        sum(t.sum() for t in touts).backward()
        for x, t in zip(xs, ts):
            if t.grad is None:
                assert x.grad is None
                continue
            assert x.grad.dtype == np.float32
            np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=float32_tol, atol=float32_tol)

    return test_gradcheck, test_gradgradcheck, test_matches_torch, test_float32_matches_torch


def case_inputs(cases, name, seed=0):
    """The inputs of shape case ``name``: normal arrays of its shapes, seeded by its place in the table."""
    rng = np.random.default_rng(seed + sorted(cases).index(name))
    return [rng.standard_normal(s) for s in cases[name][1]]


def leaves(values):
    return [tg.tensor(v, requires_grad=True) for v in values]
