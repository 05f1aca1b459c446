"""The checks of a table of ``tg.nn.functional`` cases against PyTorch, shared by
tests/test_nn_functional_layers.py and tests/test_nn_activations_losses.py.

A table maps a case's name to ``(fn, specs, second)``: ``fn(F, *tensors)`` with ``F``
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


def case_tests(cases, expected, not_finite_differences=()):
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
