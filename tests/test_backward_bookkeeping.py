"""A small tape's backward bookkeeping kept per structure (autograd/engine.py,
``_bookkeeping``): the next backward of the same structure takes it, with the same
gradients and the same errors, and anything else (another root or target, a freed
tape, a value changed in place, a longer tape) computes its own."""
import os

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import engine

pytestmark = pytest.mark.skipif(os.environ.get("TAPEGRAD_INTERPRET") == "always",
                                reason="the bookkeeping of compiled backward passes")


@pytest.fixture(autouse=True)
def compiled(monkeypatch):
    from tapegrad import _jit
    _jit.load()
    monkeypatch.setattr(engine, "INTERPRET", ["never"])
    monkeypatch.setattr(engine, "_BOOKS", {})


def _loss(x, w):
    return (tg.sin(x * w) + x ** 2).sum() + (w * 3.0).exp().mean()


def _want(x, w):
    return np.cos(x * w) * w + 2 * x, np.cos(x * w) * x + 3 * np.exp(3 * w) / w.size


def test_the_same_structure_takes_the_kept_bookkeeping(monkeypatch):
    calls = []
    layout = engine.K.layout
    monkeypatch.setattr(engine.K, "layout", lambda *a: calls.append(1) or layout(*a))
    rng = np.random.default_rng(1)
    for k in range(4):
        xv, wv = rng.standard_normal(7), rng.standard_normal(7)
        x, w = tg.tensor(xv, requires_grad=True), tg.tensor(wv, requires_grad=True)
        _loss(x, w).backward()
        for got, want in zip((x.grad, w.grad), _want(xv, wv)):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-13)
    assert len(calls) == 1 and len(engine._BOOKS) == 1
    # another target set, another root: bookkeeping of their own, then kept too
    x, w = tg.tensor(xv, requires_grad=True), tg.tensor(wv, requires_grad=True)
    gx, = tg.autograd.grad(_loss(x, w), [x])
    np.testing.assert_allclose(gx.numpy(), _want(xv, wv)[0], rtol=1e-13)
    x, w = tg.tensor(xv, requires_grad=True), tg.tensor(wv, requires_grad=True)
    (x * w).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), wv, rtol=0)
    assert len(calls) == 3 and len(engine._BOOKS) == 3


def test_a_freed_or_changed_tape_still_raises():
    xv = np.array([0.5, -1.0, 2.0])
    for _ in range(2):      # (the first keeps the structure's bookkeeping)
        x = tg.tensor(xv, requires_grad=True)
        y = (x.exp() * x).sum()
        y.backward()
        np.testing.assert_allclose(x.grad.numpy(), np.exp(xv) * (1 + xv), rtol=1e-14)
    assert len(engine._BOOKS) == 1
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
    x = tg.tensor(xv, requires_grad=True)
    e = x.exp()
    y = (e * x).sum()
    with tg.no_grad():
        e.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_a_longer_tape_is_not_kept(monkeypatch):
    monkeypatch.setattr(engine, "BOOK_ENTRIES", 8)
    xv = np.linspace(0.1, 1.0, 5)
    for _ in range(2):
        x = tg.tensor(xv, requires_grad=True)
        y = x
        for _ in range(6):
            y = y.sin() * 1.5
        y.sum().backward()
        want, v = np.ones(5), xv
        for _ in range(6):      # d/dv of v -> 1.5 sin(v), six times
            want, v = want * 1.5 * np.cos(v), 1.5 * np.sin(v)
        np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-13)
    assert len(engine._BOOKS) == 0
