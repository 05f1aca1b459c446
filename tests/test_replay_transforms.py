"""tg.autograd.functional and tg.func transforms of a tg.compile'd function give eager's
values at every call: the recording call and each replay after it (a replay's leaves are
found on its tape as an eager call's are)."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.autograd.functional as AF
from tapegrad import func as TF


def _cubes(c):
    return (c ** 3).sum()


def _mixed(c):
    return (c ** 3).sum() + (c.sin() * c).sum()


def _vector(c):
    return c ** 2 * c.sin()


def test_vhp_of_a_compiled_function_at_every_call():
    # H of sum(c^3) is diag(6 c): vhp(v) = 6 c v, at the recording call and every replay
    f = tg.compile(_cubes)
    for i in range(4):
        x = tg.tensor([1.1, 0.7, 0.3 + i])
        v = tg.tensor([1.0, -2.0, 0.5])
        got = AF.vhp(f, x, v)[1].numpy()
        np.testing.assert_allclose(got, 6 * x.numpy() * v.numpy(), rtol=1e-13)
        np.testing.assert_allclose(AF.hessian(f, x).numpy(), np.diag(6 * x.numpy()), rtol=1e-13)
    assert f.stats.recordings <= 2 and f.stats.replays >= 6


def test_literal_values_at_replays():
    f = tg.compile(_cubes)
    f(tg.tensor([9.0, 9.0]))                       # the recording
    x = tg.tensor([1.0, 2.0])
    assert AF.hvp(f, x, tg.tensor([1.0, 1.0]))[1].tolist() == [6.0, 12.0]
    assert AF.jvp(f, x, tg.tensor([1.0, 1.0]))[1].item() == 15.0       # 3 (1 + 4)
    assert AF.jacobian(f, x).tolist() == [3.0, 12.0]
    assert TF.grad(f)(x).tolist() == [3.0, 12.0]
    assert TF.hessian(f)(x).tolist() == [[6.0, 0.0], [0.0, 12.0]]
    assert f.stats.replays >= 3


_SCALAR_TRANSFORMS = [
    ("vhp", lambda F, x, v: AF.vhp(F, x, v)[1]),
    ("hvp", lambda F, x, v: AF.hvp(F, x, v)[1]),
    ("hessian", lambda F, x, v: AF.hessian(F, x)),
    ("jvp", lambda F, x, v: AF.jvp(F, x, v)[1]),
    ("vjp", lambda F, x, v: AF.vjp(F, x)[1]),
    ("jacobian", lambda F, x, v: AF.jacobian(F, x)),
    ("func.grad", lambda F, x, v: TF.grad(F)(x)),
    ("func.grad_and_value", lambda F, x, v: TF.grad_and_value(F)(x)[0]),
    ("func.hessian", lambda F, x, v: TF.hessian(F)(x)),
    ("func.jvp", lambda F, x, v: TF.jvp(F, (x,), (v,))[1]),
    ("func.vjp", lambda F, x, v: TF.vjp(F, x)[1](tg.tensor(1.0))[0]),
    ("func.jacrev", lambda F, x, v: TF.jacrev(F)(x)),
    ("func.jacfwd", lambda F, x, v: TF.jacfwd(F)(x)),
]

_VECTOR_TRANSFORMS = [
    ("jacobian", lambda F, x, v: AF.jacobian(F, x)),
    ("jacobian forward-mode", lambda F, x, v: AF.jacobian(F, x, vectorize=True, strategy="forward-mode")),
    ("jvp", lambda F, x, v: AF.jvp(F, x, v)[1]),
    ("vjp", lambda F, x, v: AF.vjp(F, x, v)[1]),
    ("func.jacrev", lambda F, x, v: TF.jacrev(F)(x)),
    ("func.jacfwd", lambda F, x, v: TF.jacfwd(F)(x)),
    ("func.jvp", lambda F, x, v: TF.jvp(F, (x,), (v,))[1]),
]


@pytest.mark.parametrize("name,op", _SCALAR_TRANSFORMS, ids=[n for n, _ in _SCALAR_TRANSFORMS])
def test_scalar_transforms_match_eager_at_every_call(name, op):
    f = tg.compile(_mixed)
    for i in range(4):
        x = tg.tensor([1.1, 0.7, 0.3 + i])
        v = tg.tensor([0.3, -1.0, 2.0 - i])
        np.testing.assert_allclose(op(f, x, v).numpy(), op(_mixed, x, v).numpy(), rtol=1e-12, atol=1e-14)
    assert f.stats.replays >= 3


@pytest.mark.parametrize("name,op", _VECTOR_TRANSFORMS, ids=[n for n, _ in _VECTOR_TRANSFORMS])
def test_vector_transforms_match_eager_at_every_call(name, op):
    f = tg.compile(_vector)
    for i in range(4):
        x = tg.tensor([1.1, 0.7, 0.3 + i])
        v = tg.tensor([0.3, -1.0, 2.0 - i])
        np.testing.assert_allclose(op(f, x, v).numpy(), op(_vector, x, v).numpy(), rtol=1e-12, atol=1e-14)
    assert f.stats.replays >= 3
