"""``argnums`` on ``tg.record(...).value_and_grad / gradient / vjp`` (torch.func's spelling)."""
import pickle

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core import tape as _tp
from tapegrad.core.registry import CONST, LEAF


def logistic(w, b, X, y):
    z = X @ w + b
    return tg.log1p(tg.exp(-y * z)).sum()


def _data(seed=0, n=40, d=3):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(d), np.array(0.25), rng.standard_normal((n, d)), np.sign(rng.standard_normal(n)))


def _expected(w, b, X, y):
    z = X @ w + b
    s = -y / (1 + np.exp(y * z))        # d/dz log(1 + exp(-y z))
    return np.log1p(np.exp(-y * z)).sum(), X.T @ s, s.sum(), np.outer(s, w), -z / (1 + np.exp(y * z))


def test_argnums_tuple_int_and_negative():
    w, b, X, y = _data()
    tape = tg.record(logistic, w, b, X, y)
    v, gw_x, gb_x, gX_x, gy_x = _expected(w, b, X, y)
    v2, (gw, gb) = tape.value_and_grad(w, b, X, y, argnums=(0, 1))
    np.testing.assert_allclose(v2, v, rtol=1e-13)
    np.testing.assert_allclose(gw, gw_x, rtol=1e-12)
    np.testing.assert_allclose(gb, gb_x, rtol=1e-12)
    g = tape.gradient(w, b, X, y, argnums=0)
    assert isinstance(g, np.ndarray) and g.shape == (3,)
    np.testing.assert_allclose(g, gw_x, rtol=1e-12)
    (g1,) = tape.gradient(w, b, X, y, argnums=(0,))        # a tuple of one for a tuple of one
    np.testing.assert_array_equal(g1, g)
    np.testing.assert_allclose(tape.gradient(w, b, X, y, argnums=-2), gX_x, rtol=1e-12)
    gy, gw2 = tape.gradient(w, b, X, y, argnums=(3, 0))    # in the order asked
    np.testing.assert_allclose(gy, gy_x, rtol=1e-12)
    np.testing.assert_array_equal(gw2, g)
    # the default is unchanged: every floating-point argument
    _, grads = tape.value_and_grad(w, b, X, y)
    assert len(grads) == 4
    np.testing.assert_allclose(grads[2], gX_x, rtol=1e-12)


def test_argnums_with_new_values_and_vjp():
    w, b, X, y = _data(1)
    tape = tg.record(logistic, w, b, X, y)
    w2, b2, X2, y2 = _data(2)
    v, gw_x, gb_x, _, _ = _expected(w2, b2, X2, y2)
    for _ in range(3):          # replays of the variant (its plan is kept)
        val, (gw, gb) = tape.value_and_grad(w2, b2, X2, y2, argnums=(0, 1))
        np.testing.assert_allclose(val, v, rtol=1e-13)
        np.testing.assert_allclose(gw, gw_x, rtol=1e-12)
    out, gw3 = tape.vjp((w2, b2, X2, y2), 2.0, argnums=0)
    np.testing.assert_allclose(out, v, rtol=1e-13)
    np.testing.assert_allclose(gw3, 2 * gw_x, rtol=1e-12)


def test_data_arguments_are_not_leaves_of_the_sweep():
    w, b, X, y = _data()
    tape = tg.record(logistic, w, b, X, y)
    tape.gradient(w, b, X, y, argnums=(0, 1))
    V = tape._variants[(0, 1)]
    ops = np.frombuffer(V.template, np.int64).reshape(V.n, _tp.NFIELDS)[:, 0]
    kinds = {src[1]: int(ops[s]) for s, src in V.sources.items() if src[0] == "arg"}
    assert kinds == {0: LEAF, 1: LEAF, 2: CONST, 3: CONST}
    # entries computed from the data alone (-y) are constants of the replayed tape
    assert V.untracked.size >= 1 and not V.rg[V.untracked].any()
    assert tape._R.rg.sum() > V.rg.sum()


def test_argnums_errors_as_torch_func_gives_them():
    w, b, X, y = _data()
    tape = tg.record(logistic, w, b, X, y)
    cases = [(4, "Got argnum=4, but only 4 positional inputs"), (-5, "Got argnum=-5, but only 4 positional inputs"),
             ((0, 7), "Got argnum=7, but only 4 positional inputs"), ((), "argnums must be non-empty"),
             ("w", "argnums must be int or Tuple\\[int, ...\\], got: <class 'str'>"),
             ([0, 1], "argnums must be int or Tuple\\[int, ...\\], got: <class 'list'>"),
             ((0, 0), "argnums elements must be unique, got \\(0, 0\\)")]
    for argnums, msg in cases:
        with pytest.raises(RuntimeError, match=msg):
            tape.gradient(w, b, X, y, argnums=argnums)
    tape2 = tg.record(lambda v, idx: v[idx].sum(), w, np.array([0, 2]))
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require gradients"):
        tape2.gradient(w, np.array([0, 2]), argnums=1)
    np.testing.assert_array_equal(tape2.gradient(w, np.array([0, 2]), argnums=0), [1.0, 0.0, 1.0])


def test_argnums_matches_torch_func():
    torch = pytest.importorskip("torch")
    from torch.func import grad_and_value
    w, b, X, y = _data(3)
    tape = tg.record(logistic, w, b, X, y)

    def tloss(w, b, X, y):
        return torch.log1p(torch.exp(-y * (X @ w + b))).sum()
    tw, tb, tX, ty = (torch.tensor(a) for a in (w, b, X, y))
    (gw_t, gX_t), v_t = grad_and_value(tloss, argnums=(0, 2))(tw, tb, tX, ty)
    v, (gw, gX) = tape.value_and_grad(w, b, X, y, argnums=(0, 2))
    np.testing.assert_allclose(v, v_t.item(), rtol=1e-13)
    np.testing.assert_allclose(gw, gw_t.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gX, gX_t.numpy(), rtol=1e-12)


def test_argnums_after_pickle_and_file(tmp_path):
    w, b, X, y = _data(4)
    tape = tg.record(logistic, w, b, X, y)
    path = tmp_path / "l.tape"
    tape.save(str(path))
    want = tape.value_and_grad(w, b, X, y, argnums=(0, 1))
    got = pickle.loads(pickle.dumps(tape)).value_and_grad(w, b, X, y, argnums=(0, 1))
    assert got[0] == want[0]
    np.testing.assert_array_equal(got[1][0], want[1][0])
    np.testing.assert_array_equal(got[1][1], want[1][1])
    # (a loaded file replays through NumPy's reverse: another summation order)
    got = tg.load_tape(str(path)).value_and_grad(w, b, X, y, argnums=(0, 1))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
    np.testing.assert_allclose(got[1][0], want[1][0], rtol=1e-13)
    np.testing.assert_allclose(got[1][1], want[1][1], rtol=1e-13)


def test_argnums_when_the_output_does_not_depend_on_them():
    tape = tg.record(lambda a, c: (a * a).sum() + 0 * c.sum(), np.ones(2), np.ones(3))
    np.testing.assert_array_equal(tape.gradient(np.ones(2), np.ones(3), argnums=0), [2.0, 2.0])
    tape = tg.record(lambda a, c: (c * 2).sum(), np.ones(2), np.ones(3))
    np.testing.assert_array_equal(tape.gradient(np.ones(2), np.ones(3), argnums=0), [0.0, 0.0])
