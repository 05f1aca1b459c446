"""slogdet and logdet at singular matrices (and logdet at a negative determinant), as
PyTorch 2.13 gives them: sign 0 (-0.0 where the LU's signs and row swaps multiply to a
negative zero) and logabsdet -inf; the gradient and the forward-mode tangent are its solves
with the LU of A^T (the factorisation PyTorch's slogdet takes of a real matrix), which divide
by the zero pivot, so infs and nans; second order (create_graph, hvp, vhp, hessian) is
PyTorch's error, since its differentiable backward calls linalg.solve, which refuses a
singular matrix.  logdet is logabsdet where the sign is not -1, NaN there with no gradient.

Each literal below follows from LAPACK's partial-pivoting LU: e.g. A = [[1, 2], [2, 4]],
A^T = P L U with the rows swapped, L = [[1, 0], [0.5, 1]], U = [[2, 4], [0, 0]]; solving
A^T X = I by L then U divides 1 and -0.5 by U's zero: X = [[-inf, inf], [inf, -inf]]."""
import numpy as np
import pytest

import tapegrad as tg

L = tg.linalg
INF, NAN = float("inf"), float("nan")

A1 = [[1.0, 2.0], [2.0, 4.0]]                                  # rank 1, sign -0.0 (one row swap)
ZERO = [[0.0, 0.0], [0.0, 0.0]]
A3 = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]       # rank 2
ONE = [[0.0]]
NEG = [[0.0, 1.0], [1.0, 0.0]]                                 # det -1
SPD2 = [[2.0, 1.0], [1.0, 3.0]]                                # det 5, A^-T = [[0.6, -0.2], [-0.2, 0.4]]
BATCH = [SPD2, A1, NEG]

# the gradient of logabsdet (and of logdet: the sign is 0, not -1) with adjoint 1
GRADS = {
    "rank 1": (A1, [[-INF, INF], [INF, -INF]]),
    "zero": (ZERO, [[NAN, NAN], [NAN, INF]]),
    "rank 2 of 3": (A3, [[NAN, NAN, NAN], [INF, -INF, INF], [-INF, INF, -INF]]),
    "1 by 1": (ONE, [[INF]]),
}


def leaf(a, dtype=tg.float64):
    return tg.tensor(a, dtype=dtype, requires_grad=True)


def same(got, want):
    """Equal infs and nans in the same places, the finite values to 1e-9."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    for where in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(where(got), where(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-9, atol=1e-12)


def logabsdet(m):
    return L.slogdet(m).logabsdet


# -- values (no torch) ---------------------------------------------------------------------
def test_values_at_singular_matrices_and_a_negative_determinant():
    for a, sign in ((A1, -0.0), (ZERO, 0.0), (A3, 0.0), (ONE, 0.0)):
        for f in (L.slogdet, tg.slogdet, lambda m: m.slogdet()):
            s, l = f(tg.tensor(a))
            assert s.item() == 0.0 and np.signbit(s.item()) == np.signbit(sign) and l.item() == -INF
        assert tg.logdet(tg.tensor(a)).item() == -INF and tg.tensor(a).logdet().item() == -INF
        assert L.det(tg.tensor(a)).item() == 0.0
    s, l = L.slogdet(tg.tensor(BATCH))
    assert s.tolist() == [1.0, 0.0, -1.0] and np.signbit(s.numpy()).tolist() == [False, True, True]
    same(l.numpy(), [np.log(5.0), -INF, 0.0])
    same(tg.logdet(tg.tensor(BATCH)).numpy(), [np.log(5.0), -INF, NAN])
    for dt in (tg.float32, tg.float64):
        s, l = L.slogdet(tg.tensor(A1, dtype=dt))
        assert s.dtype == dt and l.dtype == dt and np.signbit(s.item()) and l.item() == -INF
    assert tg.logdet(tg.tensor(BATCH)).grad_fn is None and tg.logdet(leaf(NEG)).grad_fn.name() == "WhereBackward0"


# -- reverse mode ------------------------------------------------------------------------------
@pytest.mark.parametrize("case", sorted(GRADS))
def test_gradient_at_a_singular_matrix(case, reverse):
    a, want = GRADS[case]
    for f in (logabsdet, tg.logdet):
        x = leaf(a)
        same(tg.autograd.grad(f(x), x)[0].numpy(), want)
        x = leaf(a)
        f(x).backward()
        same(x.grad.numpy(), want)
    x = leaf(a, tg.float32)
    g = tg.autograd.grad(tg.logdet(x), x)[0]
    assert g.dtype == tg.float32
    same(g.numpy(), want)


def test_gradient_scaled_and_of_the_sign_alone(reverse):
    x = leaf(A1)
    same(tg.autograd.grad(-2.0 * logabsdet(x), x)[0].numpy(), [[INF, -INF], [-INF, INF]])
    x = leaf(A1)
    same(tg.autograd.grad(L.slogdet(x).sign * 3.0, x)[0].numpy(), [[0.0, 0.0], [0.0, 0.0]])


def test_gradient_of_a_batch_with_one_singular_matrix(reverse):
    w = tg.tensor([1.0, 2.0, -3.0])
    x = leaf(BATCH)
    (logabsdet(x) * w).sum().backward()
    same(x.grad.numpy(), [[[0.6, -0.2], [-0.2, 0.4]], [[-INF, INF], [INF, -INF]], [[0.0, -3.0], [-3.0, 0.0]]])
    x = leaf(BATCH)
    (tg.logdet(x) * w).sum().backward()         # (no gradient where logdet is nan)
    same(x.grad.numpy(), [[[0.6, -0.2], [-0.2, 0.4]], [[-INF, INF], [INF, -INF]], [[0.0, 0.0], [0.0, 0.0]]])
    x = leaf(BATCH)                             # (an adjoint 0 at the singular matrix: 0 / 0)
    (logabsdet(x) * tg.tensor([1.0, 0.0, 1.0])).sum().backward()
    same(x.grad.numpy(), [[[0.6, -0.2], [-0.2, 0.4]], [[NAN, NAN], [NAN, NAN]], [[0.0, 1.0], [1.0, 0.0]]])


def test_logdet_of_a_negative_determinant_has_no_derivative(reverse):
    for a in (NEG, [[1.0, 2.0], [3.0, 4.0]]):
        x = leaf(a)
        assert np.isnan(tg.logdet(x).item())
        assert tg.autograd.grad(tg.logdet(x), x)[0].tolist() == [[0.0, 0.0], [0.0, 0.0]]
        (g,) = tg.autograd.grad(tg.logdet(x), x, create_graph=True)
        assert g.detach().tolist() == [[0.0, 0.0], [0.0, 0.0]]
        t = tg.ones(2, 2)
        assert tg.autograd.functional.jvp(tg.logdet, tg.tensor(a), t)[1].item() == 0.0
        assert tg.autograd.functional.hvp(tg.logdet, tg.tensor(a), t)[1].tolist() == [[0.0, 0.0], [0.0, 0.0]]
        assert np.all(tg.autograd.functional.hessian(tg.logdet, tg.tensor(a)).numpy() == 0.0)
    x = leaf(NEG)                               # (logabsdet's is NEG^-T)
    assert tg.autograd.grad(logabsdet(x), x)[0].tolist() == [[0.0, 1.0], [1.0, 0.0]]


# -- forward mode --------------------------------------------------------------------------------
JVPS = [(A1, [[1.0, 1.0], [1.0, 1.0]], NAN), (A1, [[1.0, 0.0], [0.0, 1.0]], -INF), (A1, [[0.0, 2.0], [1.0, 0.0]], INF),
        (ZERO, [[1.0, 0.0], [0.0, 1.0]], NAN), (A3, np.eye(3), NAN), (ONE, [[1.0]], INF), (ONE, [[-1.0]], -INF),
        (ONE, [[0.0]], NAN)]


@pytest.mark.parametrize("i", range(len(JVPS)))
def test_forward_mode_at_a_singular_matrix(i):
    # (torch.func.jvp's values; functional.jvp takes them from the tape's forward mode, where
    # torch.autograd.functional.jvp's double-backward trick raises the second-order error)
    a, t, want = JVPS[i]
    A, T = tg.tensor(a), tg.tensor(t)
    for f in (logabsdet, tg.logdet):
        v, d = tg.func.jvp(f, (A,), (T,))
        assert v.item() == -INF
        same(d.numpy(), want)
        same(tg.autograd.functional.jvp(f, A, T)[1].numpy(), want)
    (s, l), (ds, dl) = tg.func.jvp(lambda m: tuple(L.slogdet(m)), (A,), (T,))
    assert ds.item() == 0.0
    same(dl.numpy(), want)


def test_forward_mode_jacobians_at_a_singular_matrix():
    want = {2: [[NAN, NAN], [NAN, NAN]], 1: [[INF]]}
    for a in (A1, ONE):
        A = tg.tensor(a)
        same(tg.func.jacfwd(tg.logdet)(A).numpy(), want[len(a)])
        same(tg.autograd.functional.jacobian(tg.logdet, A, strategy="forward-mode", vectorize=True).numpy(),
             want[len(a)])
        same(tg.autograd.functional.jacobian(tg.logdet, A).numpy(), GRADS["rank 1" if len(a) == 2 else "1 by 1"][1])
    # a batch: each matrix's tangent on its own
    d = tg.func.jvp(tg.logdet, (tg.tensor(BATCH),), (tg.eye(2).expand(3, 2, 2),))[1]
    same(d.numpy(), [1.0, -INF, 0.0])
    d = tg.func.jvp(logabsdet, (tg.tensor(BATCH),), (tg.eye(2).expand(3, 2, 2),))[1]
    same(d.numpy(), [1.0, -INF, 0.0])


# -- second order: PyTorch's error -----------------------------------------------------------------
_REFUSED = "torch.linalg.solve: The solver failed because the input matrix is singular."


def test_second_order_at_a_singular_matrix_is_torch_error(reverse):
    for f in (logabsdet, tg.logdet):
        for a in (A1, ZERO, A3, ONE):
            x, v = leaf(a), tg.ones(len(a), len(a))
            with pytest.raises(L.LinAlgError) as e:
                tg.autograd.grad(f(x), x, create_graph=True)
            assert str(e.value) == _REFUSED
            for call in (lambda: tg.autograd.functional.hvp(f, tg.tensor(a), v),
                         lambda: tg.autograd.functional.vhp(f, tg.tensor(a), v),
                         lambda: tg.autograd.functional.hessian(f, tg.tensor(a))):
                with pytest.raises(L.LinAlgError) as e:
                    call()
                assert str(e.value) == _REFUSED
            # (torch.func.hessian's message also names "(Batch element 0)", of its vmap)
            with pytest.raises(L.LinAlgError, match="The solver failed because the input matrix is singular"):
                tg.func.hessian(f)(tg.tensor(a))
        x = leaf(BATCH)
        with pytest.raises(L.LinAlgError) as e:
            tg.autograd.grad(f(x).sum(), x, create_graph=True)
        assert str(e.value) == _REFUSED.replace(": ", ": (Batch element 1): ", 1)
        with pytest.raises(L.LinAlgError, match=r"\(Batch element 1\): The solver failed"):
            tg.autograd.functional.hvp(lambda m: f(m).sum(), tg.tensor(BATCH), tg.ones(3, 2, 2))


# -- recorded replays --------------------------------------------------------------------------------
def _loss(A, w):
    return (tg.logdet(A) * w).sum()


def test_compile_and_record_replay_singular_matrices_as_eager(reverse):
    w = np.array([1.5, -2.0])
    regular = np.array([SPD2, [[4.0, 1.0], [1.0, 2.0]]])
    singular = np.array([SPD2, A1])
    both_bad = np.array([NEG, ZERO])
    want = {0: (np.log(5.0) * 1.5 - 2.0 * np.log(7.0),
                [[[0.9, -0.3], [-0.3, 0.6]], [[-4.0 / 7.0, 2.0 / 7.0], [2.0 / 7.0, -8.0 / 7.0]]]),
            1: (INF, [[[0.9, -0.3], [-0.3, 0.6]], [[INF, -INF], [-INF, INF]]]),
            2: (NAN, [[[0.0, 0.0], [0.0, 0.0]], [[NAN, NAN], [NAN, -INF]]])}
    inputs = [regular, singular, both_bad]
    for order in ((0, 1, 2, 0), (1, 0, 2, 1)):          # (recorded at a regular and at a singular matrix)
        c = tg.compile(_loss)
        for k in order:
            x = leaf(inputs[k])
            y = c(x, tg.tensor(w))
            y.backward()
            e = leaf(inputs[k])
            ye = _loss(e, tg.tensor(w))
            ye.backward()
            same(y.item(), want[k][0])
            same(ye.item(), want[k][0])
            same(x.grad.numpy(), want[k][1])
            same(e.grad.numpy(), want[k][1])
        assert c.stats.recordings == 1 and c.stats.replays == 3
        R = tg.record(_loss, inputs[order[0]], w)
        for k in order:
            v, (g, _) = R.value_and_grad(inputs[k], w)
            same(v, want[k][0])
            same(g, want[k][1])
            jv = R.jvp((inputs[k], w), (np.ones((2, 2, 2)),), argnums=0)[1]
            same(jv, tg.func.jvp(lambda m: _loss(m, tg.tensor(w)), (tg.tensor(inputs[k]),),
                                 (tg.ones(2, 2, 2),))[1].numpy())
        with pytest.raises(L.LinAlgError, match=r"\(Batch element 1\): The solver failed"):
            R.hvp((singular, w), np.ones((2, 2, 2)), argnums=0)


# -- against PyTorch --------------------------------------------------------------------------------
TORCH_CASES = {
    "rank 1": A1, "zero": ZERO, "rank 2 of 3": A3, "1 by 1": ONE, "ones 3": np.ones((3, 3)),
    "zero column 4": [[1.0, 0.0, 2.0, 1.0], [3.0, 0.0, 1.0, 2.0], [0.0, 0.0, 4.0, 1.0], [2.0, 0.0, 1.0, 1.0]],
    "batch": BATCH,
    "batch of batches": [[A3, 2.0 * np.eye(3)],
                         [np.zeros((3, 3)), [[2.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 2.0]]]],
}


def _paths(lib, f, a, T, W, leaf_):
    """What each path gives at ``a`` in ``lib`` (tapegrad or torch): (name, thunk)."""
    def loss(m):
        return (f(m) * lib.tensor(W)).sum()

    def grad(create_graph):
        x = leaf_(a)
        return lib.autograd.grad(loss(x), x, create_graph=create_graph)[0].detach().numpy()
    fun = lib.autograd.functional
    return [("value", lambda: f(lib.tensor(a)).numpy()),
            ("grad", lambda: grad(False)),
            ("func.jvp", lambda: lib.func.jvp(f, (lib.tensor(a),), (lib.tensor(T),))[1].numpy()),
            ("func.jacfwd", lambda: lib.func.jacfwd(f)(lib.tensor(a)).numpy()),
            ("grad, create_graph", lambda: grad(True)),
            ("hvp", lambda: fun.hvp(loss, lib.tensor(a), lib.tensor(T))[1].numpy()),
            ("hessian", lambda: fun.hessian(loss, lib.tensor(a)).numpy())]


def _run(thunk):
    try:
        return thunk(), None
    except Exception as e:      # (compared with PyTorch's)
        return None, e


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", sorted(TORCH_CASES))
def test_values_gradients_and_tangents_match_torch(case, dtype):
    torch = pytest.importorskip("torch")
    a = np.asarray(TORCH_CASES[case], dtype)
    T = np.random.default_rng(0).integers(-2, 3, a.shape).astype(dtype)
    W = (np.arange(int(np.prod(a.shape[:-2]))) - 1.5).reshape(a.shape[:-2]).astype(dtype)
    for ours, theirs in ((tg.logdet, torch.logdet), (logabsdet, lambda m: torch.linalg.slogdet(m).logabsdet)):
        mine = _paths(tg, ours, a, T, W, lambda v: leaf(v, getattr(tg, dtype)))
        torch_ = _paths(torch, theirs, a, T, W, lambda v: torch.tensor(v, requires_grad=True))
        for (name, f_tg), (_, f_torch) in zip(mine, torch_):
            (got, err), (want, terr) = _run(f_tg), _run(f_torch)
            if terr is not None:
                assert isinstance(terr, torch.linalg.LinAlgError), (name, terr)
                assert isinstance(err, L.LinAlgError) and str(err) == str(terr), (name, err, terr)
            elif dtype == "float64":
                assert err is None, (name, err)
                same(got, want)
            else:       # (float32: the nonsingular matrices' inverses round otherwise)
                assert err is None, (name, err)
                for where in (np.isnan, np.isposinf, np.isneginf):
                    np.testing.assert_array_equal(where(got), where(want))
                np.testing.assert_allclose(got[np.isfinite(got)], want[np.isfinite(want)], rtol=1e-5, atol=1e-6)
    s, ts = L.slogdet(tg.tensor(a)).sign.numpy(), torch.linalg.slogdet(torch.tensor(a)).sign.numpy()
    np.testing.assert_array_equal(s, ts)
    np.testing.assert_array_equal(np.signbit(s), np.signbit(ts))


def test_negative_determinant_logdet_derivatives_match_torch():
    torch = pytest.importorskip("torch")
    for a in (NEG, [[1.0, 2.0], [3.0, 4.0]], [[[1.0, 2.0], [3.0, 4.0]], SPD2]):
        a = np.asarray(a)
        T = np.ones_like(a)
        x, y = leaf(a), torch.tensor(a, requires_grad=True)
        same(tg.autograd.grad(tg.logdet(x).sum(), x)[0].numpy(),
             torch.autograd.grad(torch.logdet(y).sum(), y)[0].numpy())
        same(tg.func.jvp(tg.logdet, (tg.tensor(a),), (tg.tensor(T),))[1].numpy(),
             torch.func.jvp(torch.logdet, (torch.tensor(a),), (torch.tensor(T),))[1].numpy())
        same(tg.autograd.functional.hessian(lambda m: tg.logdet(m).sum(), tg.tensor(a)).numpy(),
             torch.autograd.functional.hessian(lambda m: torch.logdet(m).sum(), torch.tensor(a)).numpy())
