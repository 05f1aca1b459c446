"""The forward-mode and batched paths of ``autograd.functional`` and ``tg.func`` walk the
tape the function recorded: like a backward, they must refuse values that were changed in
place after an op saved them (PyTorch raises, through its backward), and keep the values of
functions whose in-place writes touch nothing saved."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad import func
from tapegrad.autograd import functional as F
from tapegrad.autograd import tangent_program

X0 = np.array([0.3, 0.7, 1.1])
V0 = np.array([1.0, -2.0, 0.5])


def saved_then_overwritten(x):
    y = x * x
    z = y.sin()         # saves y
    y[0] = 5.0          # ... which then changes
    return (z * y).sum()


def vector_saved_then_overwritten(x):
    y = x * x
    z = y.sin()
    y[1] = 0.0
    return z * 2.0


def written_not_saved(x):
    r = tg.zeros(3, dtype=x.dtype)
    r[1:] = x[:-1] * x[1:]          # r's old value is saved by nothing
    r[0] = x[2] ** 3
    return (r.sin() * r).sum()


def written_not_saved_vector(x):
    r = tg.zeros(3, dtype=x.dtype)
    r[1:] = x[:-1] * x[1:]
    r[0] = x[2] ** 3
    return r.sin() * r


SCALAR_CALLS = {
    "hvp": lambda f, x, v: F.hvp(f, x, v)[1],
    "vhp": lambda f, x, v: F.vhp(f, x, v)[1],
    "hessian": lambda f, x, v: F.hessian(f, x),
    "func.hessian": lambda f, x, v: func.hessian(f)(x),
    "func.grad": lambda f, x, v: func.grad(f)(x),
}
VECTOR_CALLS = {
    "jvp": lambda f, x, v: F.jvp(f, x, v)[1],
    "jacobian": lambda f, x, v: F.jacobian(f, x),
    "jacobian forward": lambda f, x, v: F.jacobian(f, x, vectorize=True, strategy="forward-mode"),
    "func.jvp": lambda f, x, v: func.jvp(f, (x,), (v,))[1],
    "func.jacfwd": lambda f, x, v: func.jacfwd(f)(x),
    "func.jacrev": lambda f, x, v: func.jacrev(f)(x),
}


def _backward_message(f):
    x = tg.tensor(X0, requires_grad=True)
    out = f(x)
    with pytest.raises(RuntimeError) as e:
        out.sum().backward()
    return str(e.value)


@pytest.mark.parametrize("mode", ["now", "off"])       # the compiled programs, and the NumPy walk
@pytest.mark.parametrize("name", sorted(SCALAR_CALLS) + sorted(VECTOR_CALLS))
def test_value_changed_in_place_after_saved_raises(name, mode, monkeypatch):
    monkeypatch.setattr(tangent_program, "MODE", [mode])
    call = SCALAR_CALLS.get(name) or VECTOR_CALLS[name]
    f = saved_then_overwritten if name in SCALAR_CALLS else vector_saved_then_overwritten
    want = _backward_message(f)
    assert "modified by an inplace operation" in want
    for _ in range(3):      # (a structure walked twice gets its program)
        with pytest.raises(RuntimeError) as e:
            call(f, tg.tensor(X0), tg.tensor(V0))
        assert str(e.value) == want


def _reference(name, f):
    """The values by reverse mode alone: every Jacobian row (and Hessian row) by a backward."""
    x = tg.tensor(X0, requires_grad=True)
    out = f(x)
    if name in SCALAR_CALLS:
        g, = tg.autograd.grad(out, x, create_graph=True)
        H = np.stack([tg.autograd.grad(g[i], x, retain_graph=True)[0].numpy() for i in range(3)])
        return {"hvp": H @ V0, "vhp": V0 @ H, "hessian": H, "func.hessian": H, "func.grad": g.detach().numpy()}[name]
    J = np.stack([tg.autograd.grad(out[i], x, retain_graph=True)[0].numpy() for i in range(3)])
    return J @ V0 if "jvp" in name else J


@pytest.mark.parametrize("mode", ["now", "off"])
@pytest.mark.parametrize("name", sorted(SCALAR_CALLS) + sorted(VECTOR_CALLS))
def test_writes_to_unsaved_values_keep_the_forward_path(name, mode, monkeypatch):
    monkeypatch.setattr(tangent_program, "MODE", [mode])
    call = SCALAR_CALLS.get(name) or VECTOR_CALLS[name]
    f = written_not_saved if name in SCALAR_CALLS else written_not_saved_vector
    want = _reference(name, f)
    assert np.abs(want).max() > 0.1
    for _ in range(3):
        got = call(f, tg.tensor(X0), tg.tensor(V0))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
