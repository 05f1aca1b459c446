"""Second order at infinities, NaNs and poles: the adjoint of a constant has no tangent.

Forward over reverse carries each adjoint's tangent.  The seed's (the loss's adjoint,
1) is zero, and so is every adjoint's built from it alone; multiplied into an infinite
partial (x * x at x = inf: 2 * inf) an explicit zero made NaN where the Hessian is
finite, and NaN where PyTorch's double backward, which has no term for a constant,
gives the pole's infinity.  Both forward-over-reverse paths are checked: the NumPy walk
(``autograd.tangent``) and the compiled program (``autograd.tangent_program``), through
``functional.hvp``, ``functional.hessian`` and a recorded tape's ``hvp``."""
import os

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import functional as Fn
from tapegrad.autograd import tangent_program as TP

inf, nan = np.inf, np.nan


def _const(a):
    return tg.tensor(np.asarray(a, float))


# (name, f on tapegrad or torch, x, v, H v as the closed form gives it)
CASES = [
    ("x*x at +-inf, nan", lambda x, L: (x * x).sum(), [inf, -inf, nan], [1.0, 2.0, 3.0], [2.0, 4.0, 6.0]),
    ("x**2 at inf, nan", lambda x, L: (x ** 2).sum(), [inf, nan], [1.0, -1.0], [2.0, -2.0]),
    ("x / y, y = +-0", lambda x, L: (x / L.tensor([0.0, -0.0], dtype=L.float64)).sum(), [1.0, 0.0], [1.0, 1.0],
     [0.0, 0.0]),
    ("x * y, y = inf, nan", lambda x, L: (x * L.tensor([inf, nan], dtype=L.float64)).sum(), [0.0, 1.0], [1.0, 1.0],
     [0.0, 0.0]),
    ("amax with nan", lambda x, L: L.amax(x, 0).sum(), [1.0, nan, nan], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]),
    ("exp overflowing", lambda x, L: L.exp(x).sum(), [800.0, inf], [1.0, 1.0], [inf, inf]),
    ("log at +-0", lambda x, L: L.log(x).sum(), [0.0, -0.0], [1.0, 1.0], [-inf, -inf]),
    ("sqrt at 0", lambda x, L: L.sqrt(x).sum(), [0.0], [1.0], [-inf]),
    ("reciprocal at 0", lambda x, L: L.reciprocal(x).sum(), [0.0], [1.0], [inf]),
    ("asin at 1", lambda x, L: L.asin(x).sum(), [1.0], [1.0], [inf]),
    # finite points: unchanged
    ("x * x * y", lambda x, L: (x * x * L.tensor([3.0, -2.0], dtype=L.float64)).sum(), [1.5, 4.0], [1.0, 0.5],
     [6.0, -2.0]),
    ("sin(x) ** 2 summed twice", lambda x, L: (L.sin(x) ** 2).sum() + (x * x).sum(), [0.3, -1.1], [1.0, 2.0],
     [2 * np.cos(0.6) + 2.0, 2 * (2 * np.cos(-2.2) + 2.0)]),
]
IDS = [c[0] for c in CASES]

compiled_code = pytest.mark.skipif(os.environ.get("TAPEGRAD_INTERPRET") == "always",
                                   reason="the compiled programs are not used when interpreting")


def _set_mode(monkeypatch, mode):
    monkeypatch.setattr(TP, "MODE", [mode])
    monkeypatch.setattr(TP, "COMPILE_AFTER", 1)


def _check(got, want):
    got, want = np.asarray(got, float), np.asarray(want, float)
    assert not np.isnan(got).any(), got
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def _functional_hvp(f, x, v):
    runs = TP.RUNS[0]
    _, hv = Fn.hvp(lambda t: f(t, tg), tg.tensor(np.asarray(x, float)), tg.tensor(np.asarray(v, float)))
    return hv.numpy(), TP.RUNS[0] - runs


@pytest.mark.parametrize("name, f, x, v, want", CASES, ids=IDS)
def test_hvp_walk(monkeypatch, name, f, x, v, want):
    _set_mode(monkeypatch, "off")
    got, runs = _functional_hvp(f, x, v)
    assert runs == 0
    _check(got, want)


@compiled_code
@pytest.mark.parametrize("name, f, x, v, want", CASES, ids=IDS)
def test_hvp_compiled_program(monkeypatch, name, f, x, v, want):
    _set_mode(monkeypatch, "now")
    got, runs = _functional_hvp(f, x, v)
    assert runs == 1            # (the program served, not the walk)
    _check(got, want)


@pytest.mark.parametrize("mode", ["off", pytest.param("now", marks=compiled_code)])
def test_hessian_of_square_at_infinity(monkeypatch, mode):
    """K directions at once (the walk) and the Hessian's rows: 2 I at inf and nan."""
    _set_mode(monkeypatch, mode)
    H = Fn.hessian(lambda t: (t * t).sum() + (t[:2] * _const([inf, 1.0])).sum(),
                   tg.tensor([inf, nan, 1.0])).numpy()
    np.testing.assert_array_equal(H, 2.0 * np.eye(3))


@pytest.mark.parametrize("mode", ["off", pytest.param("now", marks=compiled_code)])
def test_recorded_tape_hvp_at_a_pole(monkeypatch, mode):
    """A recorded tape's hvp (replay's forward over reverse), at the recorded point and
    at a pole of another call."""
    _set_mode(monkeypatch, mode)

    def f(x):
        return (tg.log(x) + x * x).sum()
    rec = tg.record(f, np.array([1.0, 2.0]))
    for x0 in ([1.0, 2.0], [0.0, inf]):
        _, hv = rec.hvp(np.array(x0), np.array([1.0, 1.0]))
        with np.errstate(divide="ignore"):
            want = -1.0 / np.square(x0) + 2.0
        np.testing.assert_array_equal(hv, want)       # [-inf, 2] at the pole and inf


@pytest.mark.parametrize("name, f, x, v, want", CASES, ids=IDS)
def test_against_pytorch(name, f, x, v, want):
    torch = pytest.importorskip("torch")
    _, hv = torch.autograd.functional.hvp(lambda t: f(t, torch), torch.tensor(np.asarray(x, float)),
                                          torch.tensor(np.asarray(v, float)))
    _check(hv.numpy(), want)        # (the closed form above is PyTorch's value too)
    got, _ = _functional_hvp(f, x, v)
    np.testing.assert_array_equal(got, hv.numpy())


@compiled_code
def test_prod_with_an_infinite_element_walk_and_program_agree(monkeypatch):
    """prod's curvature takes the others' product as its first derivative does (result /
    input: NaN at the infinite element, PyTorch's), in the walk as in the program; the
    other rows are the Hessian's limits (PyTorch: NaN for the whole group)."""
    x, v = np.array([inf, 2.0, 3.0]), np.array([-0.5, 1.5, -1.25])
    got = {}
    for mode in ("off", "now"):
        _set_mode(monkeypatch, mode)
        got[mode], _ = _functional_hvp(lambda t, L: t.prod(), x, v)
    for hv in got.values():
        assert np.isnan(hv[0])
        np.testing.assert_array_equal(hv[1:], [-inf, inf])     # (3 v0 + inf v2, 2 v0 + inf v1)
    _set_mode(monkeypatch, "now")
    fin = np.array([1.5, 2.0, 3.0])
    hv, _ = _functional_hvp(lambda t, L: t.prod(), fin, v)
    H = np.array([[0, 3, 2], [3, 0, 1.5], [2, 1.5, 0]])
    np.testing.assert_allclose(hv, H @ v, rtol=1e-14)


GROUPS = {
    "logsumexp": lambda t: tg.logsumexp(t, 0),
    "softmax": lambda t: (tg.softmax(t, 0) * _const([1.0, 2.0, 3.0])).sum(),
    "log_softmax": lambda t: (tg.log_softmax(t, 0) * _const([1.0, 2.0, 3.0])).sum(),
    "var": lambda t: t.var(),
    "std": lambda t: t.std(),
    "cumsum": lambda t: (t.cumsum(0) ** 2).sum(),
    "amax": lambda t: t.amax() * 1.0,
}


@compiled_code
@pytest.mark.parametrize("name", list(GROUPS))
def test_reductions_by_groups_walk_and_program_agree(monkeypatch, name):
    """The program's calls by groups leave out the terms of a structurally zero adjoint
    tangent as the walk does: the same values at infinite and huge inputs (var at inf: the
    Hessian 2 / (n - 1) (I - 1 1^T / n), where the program gave NaN)."""
    v = np.array([1.0, -1.0, 0.5])
    for x in ([inf, 1.0, 2.0], [1e308, -1e308, 0.0], [0.5, 1.0, 2.0]):
        got = {}
        for mode in ("off", "now"):
            _set_mode(monkeypatch, mode)
            got[mode], runs = _functional_hvp(lambda t, L: GROUPS[name](t), x, v)
            assert runs == (mode == "now")
        np.testing.assert_allclose(got["now"], got["off"], rtol=1e-12, atol=1e-300, equal_nan=True)
    _set_mode(monkeypatch, "now")
    if name == "var":
        hv, _ = _functional_hvp(lambda t, L: t.var(), [inf, 1.0, 2.0], v)
        np.testing.assert_allclose(hv, (v - v.mean()), rtol=1e-14)     # 2 / (n - 1) = 1
