"""The CPU glue PyTorch scripts touch: legacy tensor types, storage queries, as_strided,
promote_types, default dtype/device, autograd.Variable, out=, vmap, and the
accelerator / backends / distributed / onnx / amp / nn.parallel answers of a CPU-only
build; against PyTorch's values (when installed), literal values and finite
differences."""
import sys
import warnings

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.func import grad, vmap


def _torch64():
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float64)
    return torch


# -- storage queries ---------------------------------------------------------------------------
def _views(lib):
    base = lib.arange(24.0).reshape(2, 3, 4)
    return {"base": base, "t": base.transpose(0, 2), "slice": base[1, 1:, ::2], "row": base[1, 2],
            "expand": lib.ones(3, 1).expand(3, 4), "perm": base.permute(2, 0, 1), "diag": base[0].diagonal(),
            "scalar": base[1, 2, 3], "flat": base.reshape(-1)[5:17], "unsq": base[0].unsqueeze(1)}


def test_storage_queries_literal():
    v = _views(tg)
    assert v["base"].stride() == (12, 4, 1) and v["base"].stride(1) == 4 and v["base"].stride(-1) == 1
    assert v["t"].stride() == (1, 4, 12) and not v["t"].is_contiguous() and v["base"].is_contiguous()
    assert v["slice"].stride() == (4, 2) and v["slice"].storage_offset() == 16
    assert v["row"].storage_offset() == 20 and v["scalar"].storage_offset() == 23 and v["scalar"].stride() == ()
    assert v["expand"].stride() == (1, 0) and not v["expand"].is_contiguous()
    assert v["diag"].stride() == (5,) and v["flat"].storage_offset() == 5
    assert v["base"].ndimension() == 3 and v["base"].nelement() == 24 and v["base"].element_size() == 8
    assert tg.ones(2, dtype=tg.float32).element_size() == 4 and tg.ones(2, dtype=tg.bool).element_size() == 1
    b = v["base"]
    assert v["row"].data_ptr() == b.data_ptr() + 20 * 8 and tg.ones(0).data_ptr() == 0
    with pytest.raises(IndexError, match="^Dimension specified as 0 but tensor has no dimensions$"):
        v["scalar"].stride(0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        b.stride(3)


def test_storage_queries_against_torch():
    torch = _torch64()
    ours, theirs = _views(tg), _views(torch)
    for k in ours:
        a, t = ours[k], theirs[k]
        assert a.stride() == t.stride(), k
        assert a.storage_offset() == t.storage_offset(), k
        assert a.is_contiguous() == t.is_contiguous(), k
        assert (a.ndimension(), a.nelement(), a.element_size()) == (t.ndimension(), t.nelement(), t.element_size())
        if k != "expand":       # (a tensor of its own)
            assert a.data_ptr() - ours["base"].data_ptr() == t.data_ptr() - theirs["base"].data_ptr(), k


# -- as_strided --------------------------------------------------------------------------------
AS_STRIDED = [((2, 2), (1, 2), None), ((3, 3), (1, 1), 0), ((4,), (0,), 2), ((2, 3), (3, 1), 3),
              ((0, 5), (1, 1), 0), ((2, 2, 2), (4, 2, 1), 0), ((5,), (2,), 1)]


@pytest.mark.parametrize("size,stride,offset", AS_STRIDED)
def test_as_strided_values_and_gradient(size, stride, offset):
    x = tg.tensor(np.random.default_rng(1).standard_normal(12), requires_grad=True)
    y = tg.as_strided(x, size, stride, offset)
    assert y.shape == size and y.stride() == stride
    flat = x.detach().numpy()
    o = 0 if offset is None else offset
    for idx in np.ndindex(*size):
        assert y[idx].item() == flat[o + sum(i * s for i, s in zip(idx, stride))]
    if y.numel():
        assert y.grad_fn is not None and type(y.grad_fn).__name__ == "AsStridedBackward0"
        assert tg.autograd.gradcheck(lambda x: tg.as_strided(x, size, stride, offset) * 1.5, (x,))
        assert tg.autograd.gradgradcheck(lambda x: tg.as_strided(x, size, stride, offset) ** 2, (x,))


def test_as_strided_against_torch():
    torch = _torch64()
    r = np.random.default_rng(2)
    for size, stride, offset in AS_STRIDED:
        data, w = r.standard_normal(12), r.standard_normal(size)
        x, xt = tg.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
        y, yt = x.as_strided(size, stride, offset), xt.as_strided(size, stride, offset)
        np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
        (y * tg.tensor(w)).sum().backward()
        (yt * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-15, atol=0)
    # views of views: the storage, as PyTorch reads it
    base, tbase = tg.arange(20.0), torch.arange(20.0)
    for f in (lambda b: b[4:].as_strided((2, 3), (5, 1)), lambda b: b[4:].as_strided((3,), (2,), 1),
              lambda b: b.reshape(4, 5).t().as_strided((2, 2), (1, 5))):
        np.testing.assert_array_equal(f(base).numpy(), f(tbase).numpy())


def test_as_strided_shares_storage_and_checks_bounds():
    x = tg.arange(6.0)
    y = x.as_strided((2, 2), (2, 1))
    with tg.no_grad():
        x[1] = 10.0
    assert y[0, 1].item() == 10.0 and y._version == x._version
    with pytest.raises(RuntimeError, match=r"^setStorage: sizes \[4\], strides \[2\], storage offset 0, and itemsize 8 "
                                           r"requiring a storage size of 56 are out of bounds for storage of size 48$"):
        x.as_strided((4,), (2,))
    with pytest.raises(RuntimeError, match="^as_strided: Negative strides are not supported at the moment, got "
                                           r"strides: \[-1\]$"):
        x.as_strided((2,), (-1,))
    with pytest.raises(RuntimeError, match="^mismatch in length of strides and shape$"):
        x.as_strided((2, 2), (1,))
    with pytest.raises(RuntimeError, match="^Tensor: invalid storage offset -1$"):
        x.as_strided((2,), (1,), -1)
    # a view of a larger storage may reach outside the input; differentiated, it must not
    big = tg.arange(10.0)
    assert big[2:5].as_strided((4,), (1,), 0).tolist() == [0.0, 1.0, 2.0, 3.0]
    leaf = tg.arange(10.0).requires_grad_()
    part = leaf[2:5]
    with pytest.raises(RuntimeError, match="as_strided: the view reaches elements of the storage outside the input"):
        part.as_strided((4,), (1,), 0)
    ok = part.as_strided((2,), (1,), 3)             # (inside the input's elements [2, 5))
    ok.sum().backward()
    assert leaf.grad.tolist() == [0, 0, 0, 1, 1, 0, 0, 0, 0, 0]


def test_as_strided_errors_against_torch():
    torch = _torch64()
    for args in [((4,), (2,)), ((2,), (-1,)), ((2, 2), (1,)), ((2,), (1,), -1)]:
        with pytest.raises(RuntimeError) as ours:
            tg.arange(6.0).as_strided(*args)
        with pytest.raises(RuntimeError) as theirs:
            torch.arange(6.0).as_strided(*args)
        assert str(ours.value) == str(theirs.value).split("\n")[0]


# -- legacy tensor types, type() ---------------------------------------------------------------
def test_legacy_constructors():
    x = tg.LongTensor([1, 2])
    assert x.dtype == tg.int64 and x.tolist() == [1, 2]
    assert tg.LongTensor([1.5, 2.7]).tolist() == [1, 2]
    assert tg.FloatTensor(2, 3).shape == (2, 3) and tg.FloatTensor(2, 3).dtype == tg.float32
    assert tg.FloatTensor().shape == (0,) and tg.DoubleTensor(np.array([1, 2])).dtype == tg.float64
    assert tg.BoolTensor([1, 0]).tolist() == [True, False]
    f = tg.ones(2, dtype=tg.float32)
    alias = tg.FloatTensor(f)
    with tg.no_grad():
        alias[0] = 5.0
    assert f[0].item() == 5.0
    assert isinstance(f, tg.FloatTensor) and not isinstance(f, tg.DoubleTensor) and isinstance(tg.ones(1), tg.DoubleTensor)
    assert tg.FloatTensor.dtype == tg.float32 and repr(tg.FloatTensor) == "<class 'tapegrad.FloatTensor'>"
    with pytest.raises(TypeError, match=r"^expected tapegrad.FloatTensor \(got tapegrad.DoubleTensor\)$"):
        tg.FloatTensor(tg.ones(2))
    with pytest.raises(TypeError, match=r"^new\(\): data must be a sequence \(got float\)$"):
        tg.FloatTensor(3.0)
    with pytest.raises(TypeError, match=r"^new\(\): argument 'size' failed to unpack the object at pos 2 with error "
                                        r"\"type must be tuple of ints,but got float\"$"):
        tg.FloatTensor(2, 3.0)
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        tg.FloatTensor([1.0], device="cuda")


def test_legacy_constructors_against_torch():
    torch = pytest.importorskip("torch")
    for name, data in [("LongTensor", [1.5, -2.7, 3]), ("FloatTensor", [1, 2]), ("IntTensor", [[1, 2], [3, 4]]),
                       ("BoolTensor", [0, 2]), ("DoubleTensor", [0.1]), ("ByteTensor", [1, 255]),
                       ("ShortTensor", [-3]), ("HalfTensor", [0.5])]:
        ours, theirs = getattr(tg, name)(data), getattr(torch, name)(data)
        assert ours.tolist() == theirs.tolist() and str(ours.dtype) == str(theirs.dtype).replace("torch.", ""), name


def test_type_method():
    x = tg.ones(2)
    assert x.type() == "torch.DoubleTensor" and tg.ones(1, dtype=tg.int32).type() == "torch.IntTensor"
    assert x.type(x.type()) is x
    assert x.type(tg.float64) is x and x.type(tg.DoubleTensor) is x
    assert x.type(tg.LongTensor).dtype == tg.int64 and x.type("torch.IntTensor").dtype == tg.int32
    assert x.type("tapegrad.FloatTensor").dtype == tg.float32
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    y = w.type(tg.float32)
    assert y.dtype == tg.float32 and type(y.grad_fn).__name__ == "ToCopyBackward0"
    (y * 3).sum().backward()
    assert w.grad.tolist() == [3.0, 3.0] and w.grad.dtype == tg.float64
    with pytest.raises(ValueError, match="^invalid type: 'float'$"):
        x.type("float")
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        x.type("torch.cuda.FloatTensor")


# -- promote_types, defaults, Variable ---------------------------------------------------------
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]


def test_promote_types():
    assert tg.promote_types(tg.uint8, tg.int8) == tg.int16
    assert tg.promote_types(tg.int64, tg.float16) == tg.float16
    assert tg.promote_types(tg.bool, tg.int8) == tg.int8
    assert tg.promote_types(tg.float32, tg.float64) == tg.float64
    assert tg.promote_types(tg.float32, tg.complex64) == tg.complex64
    assert tg.promote_types(tg.float64, tg.complex64) == tg.complex128
    with pytest.raises(TypeError, match=r"^promote_types\(\): argument 'type1' \(position 1\) must be torch.dtype, "
                                        "not int$"):
        tg.promote_types(1, tg.int8)
    try:
        import torch
    except ImportError:
        return
    for a in DTYPES:
        for b in DTYPES:
            got = tg.promote_types(getattr(tg, a), getattr(tg, b))
            assert "torch." + got.name == str(torch.promote_types(getattr(torch, a), getattr(torch, b))), (a, b)


def test_bfloat16_is_named_but_refused():
    table = {"float32": tg.float32, "bfloat16": tg.bfloat16, "float16": tg.float16}     # (nanoGPT's table loads)
    assert repr(table["bfloat16"]) == "tapegrad.bfloat16"
    with pytest.raises(TypeError, match="^Cannot interpret 'tapegrad.bfloat16' as a data type$"):
        tg.zeros(2, dtype=tg.bfloat16)


def test_default_dtype_and_device():
    assert tg.get_default_dtype() == tg.float64
    tg.set_default_dtype(tg.float64)
    with pytest.raises(NotImplementedError, match="tapegrad's default dtype is float64"):
        tg.set_default_dtype(tg.float32)
    with pytest.raises(TypeError, match="^only floating-point types are supported as the default type$"):
        tg.set_default_dtype(tg.int64)
    with pytest.raises(TypeError, match="^invalid dtype object: only floating-point types are supported"):
        tg.set_default_dtype("float")
    with pytest.warns(UserWarning, match=r"torch.set_default_tensor_type\(\) is deprecated"):
        tg.set_default_tensor_type(tg.DoubleTensor)
    tg.set_default_device("cpu")
    tg.set_default_device(tg.device("cpu"))
    tg.set_default_device(None)
    assert tg.get_default_device() == tg.device("cpu")
    with pytest.raises(AssertionError, match="^Torch not compiled with CUDA enabled$"):
        tg.set_default_device("cuda")
    assert tg.zeros(1).dtype == tg.float64


def test_variable():
    from tapegrad.autograd import Variable
    v = tg.ones(2)
    w = Variable(v, requires_grad=True)
    assert w is not v and w.requires_grad and w.is_leaf and w.data_ptr() == v.data_ptr()
    assert isinstance(v, Variable) and not isinstance([1.0], Variable)
    u = Variable(v)
    assert not u.requires_grad
    (w * 2).sum().backward()
    assert w.grad.tolist() == [2.0, 2.0] and v.grad is None
    with pytest.warns(UserWarning, match="^volatile was removed and now has no effect"):
        Variable(v, volatile=True)
    with pytest.raises(TypeError, match="^Variable data has to be a tensor, but got list$"):
        Variable([1.0])
    assert Variable().shape == (0,)
    assert tg.autograd.Variable is Variable


# -- out= --------------------------------------------------------------------------------------
def test_out_writes_into_the_given_tensor():
    a, b = tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0])
    out = tg.empty(2)
    assert tg.add(a, b, out=out) is out and out.tolist() == [4.0, 6.0]
    m = tg.empty(2, 2)
    assert tg.matmul(tg.ones(2, 3), tg.ones(3, 2), out=m) is m and m.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    s = tg.zeros(2)
    tg.sum(tg.ones(3, 2), 0, out=s)
    assert s.tolist() == [3.0, 3.0]
    c = tg.zeros(4)
    tg.cat([a, b], out=c)
    assert c.tolist() == [1.0, 2.0, 3.0, 4.0]
    mask = tg.zeros(2)                                   # a bool result into a float tensor: cast
    tg.eq(a, a, out=mask)
    assert mask.tolist() == [1.0, 1.0]
    big = tg.zeros(4)
    tg.add(a, b, out=big[::2])                          # into a view: the base sees it
    assert big.tolist() == [4.0, 0.0, 6.0, 0.0]
    v = tg.zeros(3)
    assert tg.max(tg.tensor([[1.0, 5.0, 2.0]]), 1, out=(tg.zeros(1), tg.zeros(1, dtype=tg.int64)))[0].item() == 5.0
    with pytest.warns(UserWarning, match=r"^An output with one or more elements was resized since it had shape \[3\], "
                                         r"which does not match the required output shape \[2\]"):
        tg.add(a, b, out=v)
    assert v.shape == (2,) and v.tolist() == [4.0, 6.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        e = tg.empty(0)
        tg.add(a, b, out=e)                              # (no elements: resized without a warning)
    assert e.tolist() == [4.0, 6.0]


def test_out_refusals():
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"^add\(\): functions with out=\.\.\. arguments don't support automatic "
                                           "differentiation, but one of the arguments requires grad.$"):
        tg.add(a, 1.0, out=tg.empty(2))
    with tg.no_grad():
        out = tg.empty(2)
        tg.add(a, 1.0, out=out)
    assert out.tolist() == [2.0, 3.0]
    with pytest.raises(RuntimeError, match="^result type Double can't be cast to the desired output type Long$"):
        tg.add(tg.ones(2), 1.0, out=tg.zeros(2, dtype=tg.int64))
    with pytest.raises(TypeError, match=r"^add\(\): argument 'out' must be Tensor, not list$"):
        tg.add(tg.ones(2), 1.0, out=[1])
    with pytest.raises(TypeError, match="got an unexpected keyword argument 'out'"):
        tg.sin(tg.ones(2), out=tg.ones(2))          # (the unary recorders take no out=)


def test_out_against_torch():
    torch = _torch64()
    r = np.random.default_rng(3)
    A, B = r.standard_normal((3, 3)), r.standard_normal((3, 3))
    calls = [("add", lambda lib, x, y: lib.add(x, y, alpha=2)), ("mul", lambda lib, x, y: lib.mul(x, y)),
             ("matmul", lambda lib, x, y: lib.matmul(x, y)), ("mm", lambda lib, x, y: lib.mm(x, y)),
             ("sum", lambda lib, x, y: lib.sum(x, 1)), ("mean", lambda lib, x, y: lib.mean(x, 0)),
             ("clamp", lambda lib, x, y: lib.clamp(x, -0.5, 0.5)), ("where", lambda lib, x, y: lib.where(x > 0, x, y)),
             ("cumsum", lambda lib, x, y: lib.cumsum(x, 0)), ("softmax", lambda lib, x, y: lib.softmax(x, 1)),
             ("addmm", lambda lib, x, y: lib.addmm(x, x, y, beta=0.5)), ("pow", lambda lib, x, y: lib.pow(x, 2))]
    for name, f in calls:
        expected = f(torch, torch.tensor(A), torch.tensor(B))
        out, tout = tg.empty(expected.shape), torch.empty(expected.shape)
        ours = _with_out(f, tg, tg.tensor(A), tg.tensor(B), out)
        theirs = _with_out(f, torch, torch.tensor(A), torch.tensor(B), tout)
        assert ours is out and theirs is tout, name
        np.testing.assert_allclose(out.numpy(), tout.numpy(), rtol=1e-14, atol=1e-15, err_msg=name)


def _with_out(f, lib, x, y, out):
    """Call ``f``'s library function with out= added to its call."""
    class _Lib:
        def __getattr__(self, name):
            fn = getattr(lib, name)
            return lambda *a, **k: fn(*a, out=out, **k)
    return f(_Lib(), x, y)


# -- vmap ------------------------------------------------------------------------------------------
def test_vmap_literal():
    x = tg.arange(6.0).reshape(3, 2)
    assert vmap(tg.sum)(x).tolist() == [1.0, 5.0, 9.0]
    assert vmap(tg.sum, in_dims=1)(x).tolist() == [6.0, 9.0]
    assert vmap(tg.mul, in_dims=(0, None))(x, tg.tensor([1.0, 10.0])).tolist() == [[0, 10], [2, 30], [4, 50]]
    a, b = vmap(lambda r: (r, r * 2), out_dims=(0, 1))(x)
    assert a.shape == (3, 2) and b.shape == (2, 3) and b.tolist() == [[0, 4, 8], [2, 6, 10]]
    assert vmap(lambda d: d["a"] + d["b"])({"a": x, "b": x}).tolist() == (2 * x).tolist()
    assert vmap(lambda r: {"s": r.sum()})(x)["s"].tolist() == [1.0, 5.0, 9.0]
    assert vmap(vmap(lambda s: s * 2))(x).tolist() == (2 * x).tolist()
    assert tg.vmap is vmap
    e = vmap(tg.sum)(tg.ones(0, 3))
    assert e.shape == (0,)


def test_vmap_composes_with_grad():
    x = tg.tensor([[1.0, 2.0], [3.0, -1.0]])
    per_sample = vmap(grad(lambda w: (w ** 3).sum()))(x)
    assert per_sample.tolist() == (3 * x * x).tolist()
    w = tg.tensor([0.5, -2.0], requires_grad=True)
    loss = vmap(lambda r: (r * w).sum() ** 2)(x).sum()
    (gw,) = tg.autograd.grad(loss, w)
    expected = sum(2 * float((r * w.detach()).sum()) * r for r in x.detach().numpy())
    np.testing.assert_allclose(gw.numpy(), expected, rtol=1e-15)
    assert tg.autograd.gradcheck(lambda x: vmap(lambda r: r.sin() * r.sum())(x), (x.requires_grad_(),))


def test_vmap_randomness_and_errors():
    x = tg.ones(3, 2)
    with pytest.raises(RuntimeError, match="^vmap: called random operation while in randomness error mode"):
        vmap(lambda r: tg.rand(2) + r)(x)
    same = vmap(lambda r: tg.rand(()) + r, randomness="same")(x)
    assert len(set(same[:, 0].tolist())) == 1
    diff = vmap(lambda r: tg.rand(()) + r, randomness="different")(x)
    assert len(set(diff[:, 0].tolist())) == 3
    with pytest.raises(ValueError, match=r"^vmap: Expected all tensors to have the same size in the mapped "
                                         r"dimension, got sizes \[3, 4\] for the mapped dimension$"):
        vmap(tg.add)(tg.ones(3), tg.ones(4))
    with pytest.raises(ValueError, match="^vmap: Expected at least one Tensor to vmap over$"):
        vmap(tg.mul, in_dims=(None, None))(x, x)
    with pytest.raises(ValueError, match=r"Got in_dim=2 for some input, but that input is a Tensor of "
                                         r"dimensionality 2 so expected in_dim to satisfy -2 <= in_dim < 2.$"):
        vmap(tg.sum, in_dims=2)(x)
    with pytest.raises(ValueError, match="We cannot vmap over non-Tensor arguments"):
        vmap(lambda a, b: a * b)(x, 2.0)
    with pytest.raises(ValueError, match="must only return Tensors, got type <class 'float'>"):
        vmap(lambda a: 3.0)(x)
    with pytest.raises(ValueError, match="in_dims is not compatible with the structure of `inputs`"):
        vmap(tg.mul, in_dims=(0,))(x, x)
    with pytest.raises(RuntimeError, match="Only allowed values for randomness are"):
        vmap(tg.sum, randomness="maybe")


def test_vmap_against_torch():
    torch = _torch64()
    from torch.func import vmap as tvmap, grad as tgrad
    r = np.random.default_rng(4)
    X, W = r.standard_normal((5, 3)), r.standard_normal((3, 2))
    cases = [(lambda lib: lambda x: lib.tanh(x @ w_(lib)).sum(), 0),
             (lambda lib: lambda x: (x ** 2).sum(), 0),
             (lambda lib: lambda x: lib.softmax(x, 0), 1)]

    def w_(lib):
        return lib.tensor(W)
    for make, d in cases:
        ours = vmap(make(tg), in_dims=d)(tg.tensor(X))
        theirs = tvmap(make(torch), in_dims=d)(torch.tensor(X))
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-14)
    f = lambda lib: lambda x: lib.tanh(x @ w_(lib)).sum()     # noqa: E731
    np.testing.assert_allclose(vmap(grad(f(tg)))(tg.tensor(X)).numpy(),
                               tvmap(tgrad(f(torch)))(torch.tensor(X)).numpy(), rtol=1e-14)


# -- CPU-only answers ----------------------------------------------------------------------------
def test_accelerator_backends_onnx():
    assert tg.accelerator.is_available() is False and tg.accelerator.current_accelerator() is None
    assert tg.accelerator.device_count() == 0
    with pytest.raises(RuntimeError, match="^Cannot access accelerator device when none is available.$"):
        tg.accelerator.current_device_index()
    import tapegrad.backends.cudnn as cudnn
    cudnn.benchmark = True                  # (accepted, changes nothing)
    assert not cudnn.is_available() and not tg.backends.mps.is_available() and not tg.backends.cuda.is_built()
    tg.backends.cuda.matmul.allow_tf32 = False
    assert tg.backends.cpu.get_cpu_capability() == "DEFAULT"
    import tapegrad.onnx
    assert tapegrad.onnx.is_in_onnx_export() is False
    with pytest.raises(NotImplementedError, match="tapegrad cannot export ONNX graphs"):
        tg.onnx.export(tg.nn.Linear(1, 1), (tg.ones(1, 1),), "m.onnx")


def test_distributed_answers_without_dask():
    import tapegrad.distributed as dist
    assert dist.is_available() is False and dist.is_initialized() is False
    for f in (dist.get_rank, dist.get_world_size, dist.barrier, lambda: dist.all_reduce(tg.ones(1))):
        with pytest.raises(ValueError, match="^Default process group has not been initialized, please make sure "
                                             "to call init_process_group.$"):
            f()
    with pytest.raises(RuntimeError, match="tapegrad has no torch.distributed backend"):
        dist.init_process_group("gloo")
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        dist.nothing_here
    assert tg.distributed is dist
    if "distributed" not in sys.modules:
        try:
            import distributed  # noqa: F401
        except ImportError:
            with pytest.raises(ImportError, match="tapegrad.distributed needs Dask"):
                dist.DataParallel


def test_nn_parallel():
    tg.manual_seed(0)
    lin = tg.nn.Linear(3, 2)
    dp = tg.nn.DataParallel(lin)
    assert dp.module is lin and list(dp.state_dict()) == ["module.weight", "module.bias"]
    x = tg.randn(4, 3)
    np.testing.assert_array_equal(dp(x).detach().numpy(), lin(x).detach().numpy())
    assert len(list(dp.parameters())) == 2
    from tapegrad.nn.parallel import DistributedDataParallel
    with pytest.raises(ValueError, match="^Default process group has not been initialized"):
        DistributedDataParallel(lin)


def test_autocast_is_a_no_op():
    x = tg.ones(2, 2)
    with tg.autocast("cpu"):
        y = x @ x
    assert y.dtype == tg.float64

    @tg.amp.autocast("cpu", dtype=tg.float16)
    def f(a):
        return a @ a
    assert f(x).dtype == tg.float64
    with pytest.warns(UserWarning, match="CUDA is not available or torch_xla is imported. Disabling autocast."):
        with tg.autocast("cuda"):
            pass
    with pytest.raises(ValueError, match="^Expected `device_type` of type `str`, got: `<class 'int'>`$"):
        tg.autocast(3)
    with pytest.warns(FutureWarning, match=r"torch.cuda.amp.autocast\(args...\)` is deprecated"), \
            pytest.warns(UserWarning):
        with tg.cuda.amp.autocast():
            pass
    assert tg.amp.is_autocast_available("cpu")


def test_cuda_grad_scaler_passes_through():
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    opt = tg.optim.SGD([p], lr=0.1)
    with pytest.warns(UserWarning, match="^torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                                         "Disabling.$"):
        scaler = tg.amp.GradScaler()
    with pytest.warns(FutureWarning, match="is deprecated"), pytest.warns(UserWarning):
        old = tg.cuda.amp.GradScaler()
    for s in (scaler, old, tg.amp.GradScaler("cuda", enabled=False)):
        assert not s.is_enabled() and s.get_scale() == 1.0 and s.state_dict() == {}
        loss = (p * p).sum()
        assert s.scale(loss) is loss
        opt.zero_grad()
        loss.backward()
        s.unscale_(opt)
        s.step(opt)
        s.update()
        s.load_state_dict({})
    np.testing.assert_allclose(p.detach().numpy(), [1.0 * 0.8 ** 3, 2.0 * 0.8 ** 3], rtol=1e-15)


def test_cpu_grad_scaler_against_torch():
    """GradScaler("cpu") scales and unscales as PyTorch's, skipping a step with an
    inf gradient and halving the scale."""
    grads = [[0.5, -1.0], [np.inf, 1.0], [0.25, 0.5], [2.0, 2.0]]

    def run(lib):
        p = lib.tensor([1.0, 2.0], requires_grad=True)
        opt = lib.optim.SGD([p], lr=0.1)
        s = lib.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
        trace = []
        for g in grads:
            opt.zero_grad()
            loss = s.scale((p * lib.tensor(g)).sum())
            trace.append(loss.item())
            loss.backward()
            s.step(opt)
            s.update()
            trace.append((p.detach().numpy().tolist(), s.get_scale(), dict(s.state_dict())))
        return trace

    ours = run(tg)
    assert ours[0] == 1024.0 * (0.5 - 2.0) and ours[1][0] == [0.95, 2.1]
    assert ours[3][0] == [0.95, 2.1] and ours[3][1] == 512.0            # (step 2: inf, skipped, scale halved)
    assert ours[5][1] == 512.0 and ours[7][1] == 1024.0                 # (doubled after 2 good steps)
    try:
        import torch
    except ImportError:
        return
    torch.set_default_dtype(torch.float64)
    assert ours == run(torch)


def test_a_gpt_style_training_script_runs(tmp_path):
    """The glue a nanoGPT-style train.py touches on the CPU, end to end (its model
    replaced by a small one of the layers tapegrad has)."""
    from contextlib import nullcontext

    import tapegrad as torch                                       # (the import changed)
    from tapegrad.distributed import destroy_process_group, init_process_group  # noqa: F401
    from tapegrad.nn.parallel import DistributedDataParallel as DDP  # noqa: F401

    torch.manual_seed(1337)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    device_type = "cpu"
    ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
    data = np.arange(200, dtype=np.uint16) % 13
    vocab, block = 13, 8

    def get_batch():
        ix = torch.randint(len(data) - block, (4,))
        x = torch.stack([torch.from_numpy((data[i:i + block]).astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy((data[i + 1:i + 1 + block]).astype(np.int64)) for i in ix])
        return x.to("cpu"), y.to("cpu")

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = torch.nn.Parameter(torch.randn(vocab, 16) * 0.02)
            self.head = torch.nn.Linear(16, vocab)

        def forward(self, idx, targets):
            logits = self.head(self.wte[idx])
            loss = torch.nn.functional.cross_entropy(logits.view(-1, vocab), targets.view(-1), ignore_index=-1)
            return logits, loss

    model = Tiny()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    import inspect
    fused = "fused" in inspect.signature(torch.optim.AdamW).parameters and device_type == "cuda"
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=1e-2, betas=(0.9, 0.99), **(dict(fused=True) if fused else dict()))
    with pytest.warns(UserWarning, match="CUDA is not available"), pytest.warns(FutureWarning):
        scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
    losses = []
    X, Y = get_batch()
    for it in range(30):
        lr = 1e-2 * min(1.0, (it + 1) / 5)
        for group in optimizer.param_groups:
            group["lr"] = lr
        with ctx:
            logits, loss = model(X, Y)
        X, Y = get_batch()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    ckpt = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iter_num": 30}
    torch.save(ckpt, tmp_path / "ckpt.pt")
    back = torch.load(tmp_path / "ckpt.pt")
    model2 = Tiny()
    model2.load_state_dict(back["model"])
    opt2 = torch.optim.AdamW(model2.parameters(), lr=1e-2)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt2.load_state_dict(back["optimizer"])
    est = torch.zeros(3)
    with torch.no_grad():
        for k in range(3):
            est[k] = model2(X, Y)[1].item()
    np.testing.assert_allclose(est.mean().item(), model(X, Y)[1].item(), rtol=1e-12)
