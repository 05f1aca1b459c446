"""Complex tensors (tapegrad/complex_tensor.py), tg.fft and tg.linalg.eig: values and
gradients against PyTorch (the compiled and the interpreted reverse), gradcheck and
gradgradcheck through real inputs, NumPy's values without torch, replay, PyTorch's
gradient convention for complex leaves, and the refusals of what a complex tensor
does not support."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import engine
from tapegrad.complex_tensor import ComplexTensor

try:
    import torch
except ImportError:         # (the torch comparisons skip; the rest runs)
    torch = None


def rng(seed=0):
    return np.random.default_rng(seed)


# name -> (f(lib, *inputs) returning a real tensor, input shapes); lib is torch or tapegrad
CASES = {
 "fft abs": (lambda L, x: L.fft.fft(x).abs(), [(8,)]),
 "fft n pad": (lambda L, x: L.view_as_real(L.fft.fft(x, n=11)), [(3, 8)]),
 "fft n trim dim0": (lambda L, x: L.view_as_real(L.fft.fft(x, n=3, dim=0)), [(5, 4)]),
 "fft ortho": (lambda L, x: L.view_as_real(L.fft.fft(x, norm="ortho")), [(6,)]),
 "fft forward": (lambda L, x: L.view_as_real(L.fft.fft(x, norm="forward")), [(6,)]),
 "ifft imag": (lambda L, x: L.fft.ifft(x).imag.resolve_neg(), [(7,)]),
 "ifft complex in": (lambda L, x: L.view_as_real(L.fft.ifft(L.view_as_complex(x))), [(5, 2)]),
 "rfft": (lambda L, x: L.view_as_real(L.fft.rfft(x)), [(8,)]),
 "rfft odd": (lambda L, x: L.view_as_real(L.fft.rfft(x)), [(2, 7)]),
 "rfft n": (lambda L, x: L.view_as_real(L.fft.rfft(x, n=10, dim=0, norm="ortho")), [(6, 3)]),
 "irfft": (lambda L, x: L.fft.irfft(L.fft.rfft(x), n=4), [(4,)]),
 "irfft direct even": (lambda L, x: L.fft.irfft(L.view_as_complex(x)), [(5, 2)]),
 "irfft direct odd n": (lambda L, x: L.fft.irfft(L.view_as_complex(x), n=9), [(5, 2)]),
 "irfft n big": (lambda L, x: L.fft.irfft(L.view_as_complex(x), n=14, norm="forward"), [(3, 5, 2)]),
 "irfft real in": (lambda L, x: L.fft.irfft(x), [(6,)]),
 "fft2": (lambda L, x: L.fft.fft2(x).abs(), [(3, 4)]),
 "fftn": (lambda L, x: L.fft.fftn(x).abs(), [(2, 3, 4)]),
 "fftn s dim": (lambda L, x: L.view_as_real(L.fft.fftn(x, s=(5, 2), dim=(0, 2))), [(2, 3, 4)]),
 "ifftn": (lambda L, x: L.view_as_real(L.fft.ifftn(L.view_as_complex(x))), [(3, 4, 2)]),
 "rfft2": (lambda L, x: L.view_as_real(L.fft.rfft2(x)), [(4, 6)]),
 "rfftn": (lambda L, x: L.view_as_real(L.fft.rfftn(x)), [(3, 4, 5)]),
 "irfftn": (lambda L, x: L.fft.irfftn(L.view_as_complex(x)), [(3, 4, 2)]),
 "irfft2 s": (lambda L, x: L.fft.irfft2(L.view_as_complex(x), s=(4, 7)), [(3, 4, 2)]),
 "hfft": (lambda L, x: L.fft.hfft(L.view_as_complex(x)), [(5, 2)]),
 "hfft n": (lambda L, x: L.fft.hfft(L.view_as_complex(x), n=7, norm="ortho"), [(5, 2)]),
 "ihfft": (lambda L, x: L.view_as_real(L.fft.ihfft(x).resolve_conj()), [(6,)]),
 "fftshift": (lambda L, x: L.fft.fftshift(x), [(5, 4)]),
 "fftshift dim": (lambda L, x: L.fft.fftshift(x, dim=1), [(5, 4)]),
 "ifftshift complex": (lambda L, x: L.view_as_real(L.fft.ifftshift(L.view_as_complex(x))), [(5, 3, 2)]),
 "mul": (lambda L, a, b: L.view_as_real(L.view_as_complex(a) * L.view_as_complex(b)), [(3, 2), (3, 2)]),
 "mul real": (lambda L, a, b: L.view_as_real(L.view_as_complex(a) * b), [(4, 3, 2), (3,)]),
 "rmul real": (lambda L, a, b: L.view_as_real(b * L.view_as_complex(a)), [(4, 3, 2), (3,)]),
 "mul scalar c": (lambda L, a: L.view_as_real(L.view_as_complex(a) * (2 - 3j)), [(3, 2)]),
 "rmul scalar c": (lambda L, a: L.view_as_real((2 - 3j) * L.view_as_complex(a)), [(3, 2)]),
 "real * 1j": (lambda L, a: L.view_as_real(a * 1j), [(3,)]),
 "div": (lambda L, a, b: L.view_as_real(L.view_as_complex(a) / L.view_as_complex(b)), [(3, 2), (3, 2)]),
 "rdiv real": (lambda L, a, b: L.view_as_real(b / L.view_as_complex(a)), [(3, 2), (3,)]),
 "div real": (lambda L, a, b: L.view_as_real(L.view_as_complex(a) / b), [(3, 2), (3,)]),
 "add sub": (lambda L, a, b: L.view_as_real(L.view_as_complex(a) + b - 2.5 + 1j), [(2, 3, 2), (3,)]),
 "rsub": (lambda L, a, b: L.view_as_real(b - L.view_as_complex(a)), [(2, 3, 2), (3,)]),
 "neg conj": (lambda L, a: L.view_as_real(-L.view_as_complex(a).conj().resolve_conj()), [(3, 2)]),
 "abs": (lambda L, a: L.view_as_complex(a).abs(), [(4, 2)]),
 "angle": (lambda L, a: L.view_as_complex(a).angle(), [(4, 2)]),
 "angle fn": (lambda L, a: L.angle(L.view_as_complex(a)), [(4, 2)]),
 "angle real": (lambda L, a: L.angle(a), [(5,)]),
 "exp": (lambda L, a: L.view_as_real(L.view_as_complex(a).exp()), [(4, 2)]),
 "real imag": (lambda L, a: L.view_as_complex(a).real * L.view_as_complex(a).imag, [(4, 2)]),
 "complex": (lambda L, a, b: L.view_as_real(L.complex(a, b)), [(3,), (2, 3)]),
 "polar": (lambda L, a, b: L.view_as_real(L.polar(a.abs() + 0.1, b)), [(3,), (3,)]),
 "sum": (lambda L, a: L.view_as_real(L.view_as_complex(a).sum()), [(3, 4, 2)]),
 "sum dim": (lambda L, a: L.view_as_real(L.view_as_complex(a).sum(-1, keepdim=True)), [(3, 4, 2)]),
 "mean dim": (lambda L, a: L.view_as_real(L.view_as_complex(a).mean(0)), [(3, 4, 2)]),
 "reshape T": (lambda L, a: L.view_as_real(L.view_as_complex(a).reshape(4, 3).T), [(3, 4, 2)]),
 "permute": (lambda L, a: L.view_as_real(L.view_as_complex(a).permute(2, 0, 1)), [(2, 3, 4, 2)]),
 "getitem": (lambda L, a: L.view_as_real(L.view_as_complex(a)[1:, ::2]), [(3, 4, 2)]),
 "getitem ell": (lambda L, a: L.view_as_real(L.view_as_complex(a)[..., 0]), [(3, 4, 2)]),
 "unsq sq": (lambda L, a: L.view_as_real(L.view_as_complex(a).unsqueeze(-1).squeeze(0)), [(1, 4, 2)]),
 "cat": (lambda L, a, b: L.view_as_real(L.cat([L.view_as_complex(a), b], -1)), [(2, 3, 2), (2, 2)]),
 "stack": (lambda L, a, b: L.view_as_real(L.stack([L.view_as_complex(a), L.view_as_complex(b)], -1)), [(2, 3, 2), (2, 3, 2)]),
 "matmul": (lambda L, a, b: L.view_as_real(L.view_as_complex(a) @ L.view_as_complex(b)), [(3, 4, 2), (4, 2, 2)]),
 "mH": (lambda L, a: L.view_as_real(L.view_as_complex(a).mH.resolve_conj()), [(3, 4, 2)]),
 "pow": (lambda L, a: L.view_as_real(L.view_as_complex(a) ** 3), [(3, 2)]),
 "flatten": (lambda L, a: L.view_as_real(L.view_as_complex(a).flatten()), [(3, 4, 2)]),
 "where": (lambda L, a, b: L.view_as_real(L.where(b > 0, L.view_as_complex(a), 0j)), [(3, 2), (3,)]),
 "power spectrum": (lambda L, x: (L.fft.rfft(x).abs() ** 2).sum(-1), [(4, 16)]),
}
CASES.update({
    "eig values": (lambda L, a: L.linalg.eig(a)[0].real, [(3, 3)]),
    "eigvals batched": (lambda L, a: L.view_as_real(L.linalg.eigvals(a)), [(2, 4, 4)]),
    "eig vectors abs": (lambda L, a: L.linalg.eig(a)[1].abs(), [(3, 3)]),
    "eig rebuilt": (lambda L, a: L.view_as_real((lambda lv: lv[1] @ (lv[0].unsqueeze(-1) * lv[1].mH))(
        L.linalg.eig(a)).resolve_conj()), [(3, 3)]),
    "eig complex input": (lambda L, a: L.view_as_real(L.linalg.eig(L.view_as_complex(a))[0]), [(3, 3, 2)]),
})
_NO_GRADGRAD = {"angle real"}       # (its gradient is zero everywhere: nothing to differentiate twice)


def _inputs(name):
    return [rng(sum(map(ord, name))).standard_normal(s) for s in CASES[name][1]]


def _weights(shape):
    return rng(7).standard_normal(shape)


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_match_torch(name, monkeypatch):
    f, _ = CASES[name]
    arrays = _inputs(name)
    tx = [torch.tensor(a, requires_grad=True) for a in arrays]
    ty = f(torch, *tx)
    (ty * torch.tensor(_weights(ty.shape))).sum().backward()
    for mode in ("never", "always"):
        monkeypatch.setattr(engine, "INTERPRET", [mode])
        xs = [tg.tensor(a, requires_grad=True) for a in arrays]
        y = f(tg, *xs)
        assert not isinstance(y, ComplexTensor)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-10)
        (y * tg.tensor(_weights(y.shape))).sum().backward()
        for x, t in zip(xs, tx):
            want = np.zeros(t.shape) if t.grad is None else t.grad.numpy()
            got = np.zeros(x.shape) if x.grad is None else x.grad.numpy()
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10, err_msg=mode)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck_and_gradgradcheck(name):
    f, _ = CASES[name]
    def fn(*xs):
        return f(tg, *xs)
    assert tg.autograd.gradcheck(fn, [tg.tensor(a, requires_grad=True) for a in _inputs(name)])
    if name not in _NO_GRADGRAD:
        assert tg.autograd.gradgradcheck(fn, [tg.tensor(a, requires_grad=True) for a in _inputs(name)])


# -- values against NumPy (no torch) ------------------------------------------------------------
def test_fft_values_against_numpy():
    x = rng(1).standard_normal((3, 8))
    z = x + 1j * rng(2).standard_normal((3, 8))
    X, Z = tg.tensor(x), tg.tensor(z)
    np.testing.assert_allclose(tg.fft.fft(X).numpy(), np.fft.fft(x), atol=1e-12)
    np.testing.assert_allclose(tg.fft.fft(X, n=5, dim=0, norm="ortho").numpy(), np.fft.fft(x, 5, 0, "ortho"),
                               atol=1e-12)
    np.testing.assert_allclose(tg.fft.ifft(Z).numpy(), np.fft.ifft(z), atol=1e-12)
    np.testing.assert_allclose(tg.fft.fft2(Z).numpy(), np.fft.fft2(z), atol=1e-12)
    np.testing.assert_allclose(tg.fft.ifftn(Z, s=(4, 6)).numpy(), np.fft.ifftn(z, s=(4, 6), axes=(0, 1)), atol=1e-12)
    np.testing.assert_allclose(tg.fft.rfft(X).numpy(), np.fft.rfft(x), atol=1e-12)
    np.testing.assert_allclose(tg.fft.rfftn(X).numpy(), np.fft.rfftn(x), atol=1e-12)
    np.testing.assert_allclose(tg.fft.irfft(Z, n=9).numpy(), np.fft.irfft(z, 9), atol=1e-12)
    np.testing.assert_allclose(tg.fft.irfftn(Z, s=(2, 10)).numpy(), np.fft.irfftn(z, s=(2, 10), axes=(0, 1)), atol=1e-12)
    np.testing.assert_allclose(tg.fft.hfft(Z).numpy(), np.fft.hfft(z), atol=1e-12)
    np.testing.assert_allclose(tg.fft.ihfft(X).numpy(), np.fft.ihfft(x), atol=1e-12)
    np.testing.assert_array_equal(tg.fft.fftshift(X).numpy(), np.fft.fftshift(x))
    np.testing.assert_array_equal(tg.fft.ifftshift(Z, dim=1).numpy(), np.fft.ifftshift(z, axes=1))
    np.testing.assert_allclose(tg.fft.fftfreq(5, d=0.1).numpy(), [0.0, 2.0, 4.0, -4.0, -2.0])
    np.testing.assert_allclose(tg.fft.rfftfreq(6).numpy(), [0.0, 1 / 6, 2 / 6, 0.5])
    assert tg.fft.fftfreq(4, dtype=tg.float32).dtype == tg.float32


def test_fft_gradients_by_hand():
    # d/dx sum |fft(x)|^2 = 2 n x (Parseval); d/dx_j sum(real(rfft(x))) = sum_k cos(2 pi j k / n)
    x = tg.tensor(rng(3).standard_normal(6), requires_grad=True)
    (tg.fft.fft(x).abs() ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 12 * x.detach().numpy(), rtol=1e-12)
    x = tg.tensor(rng(4).standard_normal(5), requires_grad=True)
    tg.fft.rfft(x).real.sum().backward()
    want = [sum(np.cos(2 * np.pi * j * k / 5) for k in range(3)) for j in range(5)]
    np.testing.assert_allclose(x.grad.numpy(), want, atol=1e-12)
    np.testing.assert_allclose(want, [3.0, 0.5, 0.5, 0.5, 0.5], atol=1e-12)


def test_fft_float32_keeps_its_dtype():
    x = tg.tensor(rng(5).standard_normal(8), dtype=tg.float32, requires_grad=True)
    y = tg.fft.rfft(x)
    assert y.dtype == tg.complex64
    y.abs().sum().backward()
    assert x.grad.dtype == tg.float32
    assert tg.fft.irfft(y).dtype == tg.float32
    assert tg.fft.fft(tg.tensor([1, 2, 3])).dtype == tg.complex128       # (integers: the default float)


# -- eig ------------------------------------------------------------------------------------------
def test_eig_values_vectors_against_numpy():
    A = rng(6).standard_normal((2, 4, 4))
    L, V = tg.linalg.eig(tg.tensor(A))
    assert L.dtype == V.dtype == tg.complex128 and L.shape == (2, 4) and V.shape == (2, 4, 4)
    np.testing.assert_allclose(np.sort_complex(L.numpy().ravel()), np.sort_complex(np.linalg.eigvals(A).ravel()),
                               atol=1e-12)
    np.testing.assert_allclose(A @ V.numpy(), V.numpy() * L.numpy()[..., None, :], atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(V.numpy(), axis=-2), 1.0, atol=1e-12)


def test_eig_refuses_a_loss_that_depends_on_the_eigenvectors_phase():
    A = tg.tensor(rng(7).standard_normal((3, 3)) + np.diag([0.0, 0.0, 0.0]), requires_grad=True)
    L, V = tg.linalg.eig(A)
    with pytest.raises(RuntimeError, match="specified up to multiplication by e\\^\\{i phi\\}"):
        (V.real.sum() + V.imag.sum()).backward()


def test_eig_errors():
    with pytest.raises(RuntimeError, match="must be batches of square matrices"):
        tg.linalg.eig(tg.zeros(2, 3))
    with pytest.raises(RuntimeError, match="should not contain infs or NaNs"):
        tg.linalg.eig(tg.tensor([[1.0, float("nan")], [0.0, 1.0]]))


# -- complex tensors ---------------------------------------------------------------------------------
def test_creation_dtypes_and_printing():
    c = tg.tensor([1 + 2j, 3 - 1j], requires_grad=True)
    assert isinstance(c, tg.Tensor) and c.dtype == tg.complex128 and c.is_complex() and tg.is_complex(c)
    assert c.shape == (2,) and c.is_leaf and c.requires_grad
    assert repr(c) == "tensor([1.+2.j, 3.-1.j], requires_grad=True)"
    assert tg.zeros(2, dtype=tg.complex64).dtype == tg.cfloat
    assert tg.ones(2, 3, dtype=tg.cdouble).numpy().tolist() == [[1 + 0j] * 3] * 2
    assert tg.tensor(3j).item() == 3j
    assert tg.tensor([1, 2], dtype=tg.complex128).tolist() == [1 + 0j, 2 + 0j]
    np.testing.assert_array_equal(tg.from_numpy(np.array([1j, 2.0])).numpy(), [1j, 2.0])
    np.testing.assert_array_equal(tg.as_tensor(np.array([1j])).numpy(), [1j])
    x = tg.tensor([1.0, 2.0])
    assert not x.is_complex() and x.real is x and x.conj() is x
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
        x.imag


def test_complex_data_is_never_cast_to_real():
    c = tg.tensor([[1 + 2j, 3.0]])
    assert c.dtype == tg.complex128
    np.testing.assert_array_equal(c.numpy(), [[1 + 2j, 3.0]])


def test_gradient_of_a_complex_leaf_is_pytorchs():
    # PyTorch's convention: the gradient of a real loss is dL/dre + i dL/dim (|c|^2 -> 2c)
    c = tg.tensor([1 + 2j, 3 - 1j], requires_grad=True)
    (c * c.conj()).real.sum().backward()
    np.testing.assert_allclose(c.grad.numpy(), [2 + 4j, 6 - 2j])
    assert c.grad.dtype == tg.complex128
    (g,) = tg.autograd.grad((c.abs() ** 2).sum(), c)
    np.testing.assert_allclose(g.numpy(), [2 + 4j, 6 - 2j])
    # a complex output needs its gradient, as in PyTorch
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for real scalar outputs"):
        (c * 2).sum().backward()
    c.grad = None
    (c * (1 - 1j)).backward(tg.tensor([1 + 0j, 1j]))
    np.testing.assert_allclose(c.grad.numpy(), [1 + 1j, -1 + 1j])
    if torch is not None:
        t = torch.tensor([1 + 2j, 3 - 1j], requires_grad=True)
        (t * (1 - 1j)).backward(torch.tensor([1 + 0j, 1j]))
        np.testing.assert_allclose(c.grad.numpy(), t.grad.numpy())


def test_real_tensors_meet_complex_numbers():
    x = tg.tensor([1.0, -2.0], requires_grad=True)
    z = x * 1j + 2
    assert z.dtype == tg.complex128
    np.testing.assert_array_equal(z.detach().numpy(), [2 + 1j, 2 - 2j])
    z.imag.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal((x * np.array([1 + 2j, 3])).detach().numpy(), [1 + 2j, -6])
    w = x.to(tg.complex128)
    assert w.dtype == tg.complex128 and w.grad_fn is not None
    f = tg.tensor([1.0], dtype=tg.float32)
    assert (tg.tensor([1j], dtype=tg.complex64) * f).dtype == tg.complex64
    assert (tg.tensor([1j], dtype=tg.complex64) * tg.tensor([1.0])).dtype == tg.complex128
    assert (tg.tensor([1j], dtype=tg.complex64) * 2.0).dtype == tg.complex64


def test_operations_a_complex_tensor_does_not_support_refuse_it():
    c = tg.tensor([1 + 2j], requires_grad=True)
    for call in (lambda: tg.sin(c), lambda: c.sin(), lambda: c.log(), lambda: tg.sigmoid(c), lambda: c.max(),
                 lambda: tg.nn.functional.relu(c), lambda: tg.linalg.det(c.reshape(1, 1))):
        with pytest.raises((TypeError, RuntimeError)):
            call()
    with pytest.raises(TypeError, match="does not take a complex tensor"):
        tg.exp2(c)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype"):
        tg.ones(2, 2) @ tg.ones(2, 2, dtype=tg.complex128)
    with pytest.raises(RuntimeError, match="rfft expects a real input tensor"):
        tg.fft.rfft(c)
    with pytest.raises(ValueError, match="Invalid normalization mode"):
        tg.fft.fft(tg.ones(4), norm="bad")
    with pytest.raises(RuntimeError, match="Tensor must have a last dimension of size 2"):
        tg.view_as_complex(tg.ones(3))
    with pytest.raises(RuntimeError, match="view_as_real is only supported for complex tensors"):
        tg.view_as_real(tg.ones(3))


def test_views_share_memory():
    r = tg.tensor([[1.0, 2.0], [3.0, 4.0]])
    c = tg.view_as_complex(r)
    assert tg.view_as_real(c) is r
    np.testing.assert_array_equal(c.numpy(), [1 + 2j, 3 + 4j])


def test_hooks_and_retain_grad_see_complex_gradients():
    c = tg.tensor([1 + 1j, 2 - 1j], requires_grad=True)
    d = c * 2
    d.retain_grad()
    seen = []
    d.register_hook(lambda g: seen.append(g.numpy().copy()))
    d.abs().sum().backward()
    want = 2 * c.detach().numpy() / np.abs(2 * c.detach().numpy())
    np.testing.assert_allclose(seen[0], want)
    np.testing.assert_allclose(d.grad.numpy(), want)
    np.testing.assert_allclose(c.grad.numpy(), 2 * want)


def test_abs_and_angle_have_pytorchs_zero_gradient_at_zero():
    p = tg.tensor([[0.0, 0.0], [3.0, 4.0]], requires_grad=True)
    c = tg.view_as_complex(p)
    (c.abs().sum() + c.angle().sum()).backward()
    np.testing.assert_allclose(p.grad.numpy(), [[0.0, 0.0], [0.6 - 0.16, 0.8 + 0.12]])


# -- replay ---------------------------------------------------------------------------------------------
def _power(x):
    return (tg.fft.rfft(x).abs() ** 2).sum() + tg.fft.irfft(tg.fft.fft(x)[: x.shape[0] // 2 + 1]).sum()


def test_compile_replays_complex_intermediates():
    f = tg.compile(_power)
    for seed in range(4):
        a = rng(seed).standard_normal(16)
        x, y = tg.tensor(a, requires_grad=True), tg.tensor(a, requires_grad=True)
        v = f(x)
        v.backward()
        w = _power(y)
        w.backward()
        np.testing.assert_allclose(v.item(), w.item(), rtol=1e-13)
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert f.stats.replays >= 2 and f.stats.divergences == 0


def test_compile_returns_complex_outputs_and_runs_complex_arguments_eagerly():
    f = tg.compile(lambda x: tg.fft.fft(x) * 2)
    for seed in range(3):
        a = rng(seed).standard_normal(6)
        out = f(tg.tensor(a))
        assert isinstance(out, ComplexTensor)
        np.testing.assert_allclose(out.numpy(), 2 * np.fft.fft(a), atol=1e-12)
    assert f.stats.replays >= 1
    g = tg.compile(lambda c: (c * c).real)
    for seed in range(3):
        z = rng(seed).standard_normal(3) + 1j
        np.testing.assert_allclose(g(tg.tensor(z)).numpy(), (z * z).real)


def test_record_replays_an_fft_loss_and_its_tape_file_loads(tmp_path):
    def loss(x):
        return tg.fft.fft2(x.reshape(4, 4)).abs().sum()
    tape = tg.record(loss, np.zeros(16))
    path = tmp_path / "fft.tape"
    tape.save(str(path))
    loaded = tg.load_tape(str(path))
    a = rng(9).standard_normal(16)
    x = tg.tensor(a, requires_grad=True)
    loss(x).backward()
    for t in (tape, loaded):
        v, g = t.value_and_grad(a)
        np.testing.assert_allclose(v, np.abs(np.fft.fft2(a.reshape(4, 4))).sum(), rtol=1e-13)
        np.testing.assert_allclose(g, x.grad.numpy(), rtol=1e-11, atol=1e-12)


def test_public_functions_take_complex_tensors_positionally_and_by_keyword():
    c = tg.tensor([1j, 2.0])
    np.testing.assert_array_equal(tg.sum(input=c).numpy(), 2 + 1j)
    np.testing.assert_array_equal(tg.cat(tensors=[c, tg.tensor([3.0])]).numpy(), [1j, 2, 3])
    np.testing.assert_array_equal(tg.add(c, other=1).numpy(), [1 + 1j, 3])
    np.testing.assert_array_equal(tg.mul(2, c).numpy(), [2j, 4])
    np.testing.assert_array_equal(tg.where(tg.tensor([True, False]), c, 0).numpy(), [1j, 0])
    np.testing.assert_array_equal(tg.abs(c).numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(tg.stack([c, c], 1).numpy(), [[1j, 1j], [2, 2]])
    np.testing.assert_array_equal(tg.reshape(c, (2, 1)).numpy(), [[1j], [2]])
    assert tg.sum(tg.ones(3)).item() == 3.0 and tg.where(tg.tensor([True]), 1.0, 0.0).item() == 1.0


def test_in_place_arithmetic():
    c = tg.tensor([1 + 1j, 2.0])
    c += 1j
    c *= 2
    c.sub_(tg.tensor([1.0, 1.0]))
    np.testing.assert_array_equal(c.numpy(), [1 + 4j, 3 + 2j])
    p = tg.tensor([[1.0, 0.0], [0.0, 1.0]], requires_grad=True)
    z = tg.view_as_complex(p * 1.0)
    z.mul_(1j)
    z.real.sum().backward()         # real(i z) = -imag(z): the gradient flows through the write
    np.testing.assert_array_equal(p.grad.numpy(), [[0.0, -1.0], [0.0, -1.0]])
    leaf = tg.tensor([1j], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        leaf += 1
