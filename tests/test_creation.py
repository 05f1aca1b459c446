"""Creation functions and devices: ``device=`` on every creation function, tg.device,
Tensor.device / to / cpu / cuda, tg.cuda, as_tensor / asarray / from_numpy / clone,
compared with PyTorch (values, dtypes, errors) where torch is installed."""
import numpy as np
import pytest

import tapegrad as tg

# (name, call with device=...) for every creation function
CREATORS = {
    "tensor": lambda m, **k: m.tensor([1.0, 2.0], **k),
    "as_tensor": lambda m, **k: m.as_tensor([1.0, 2.0], **k),
    "asarray": lambda m, **k: m.asarray([1.0, 2.0], **k),
    "zeros": lambda m, **k: m.zeros(2, 3, **k),
    "ones": lambda m, **k: m.ones((2, 3), **k),
    "empty": lambda m, **k: m.empty(2, **k),
    "full": lambda m, **k: m.full((2,), 7, **k),
    "arange": lambda m, **k: m.arange(5, **k),
    "linspace": lambda m, **k: m.linspace(0, 1, 5, **k),
    "eye": lambda m, **k: m.eye(3, **k),
    "logspace": lambda m, **k: m.logspace(0, 2, 3, **k),
    "Tensor.new_zeros": lambda m, **k: m.ones(2).new_zeros(2, 3, **k),
    "Tensor.new_full": lambda m, **k: m.ones(2).new_full((2,), 1.5, **k),
    "Tensor.new_tensor": lambda m, **k: m.ones(2).new_tensor([1.0], **k),
    "rand": lambda m, **k: m.rand(2, 3, **k),
    "randn": lambda m, **k: m.randn(2, 3, **k),
    "randint": lambda m, **k: m.randint(0, 10, (4,), **k),
    "randperm": lambda m, **k: m.randperm(6, **k),
    "normal": lambda m, **k: m.normal(0.0, 1.0, (3,), **k),
    "zeros_like": lambda m, **k: m.zeros_like(m.ones(2, 2), **k),
    "ones_like": lambda m, **k: m.ones_like(m.ones(2, 2), **k),
    "empty_like": lambda m, **k: m.empty_like(m.ones(2, 2), **k),
    "full_like": lambda m, **k: m.full_like(m.ones(2, 2), 3.0, **k),
    "rand_like": lambda m, **k: m.rand_like(m.ones(2, 2), **k),
    "randn_like": lambda m, **k: m.randn_like(m.ones(2, 2), **k),
    "randint_like": lambda m, **k: m.randint_like(m.ones(2, 2), 5, **k),
}


@pytest.mark.parametrize("name", sorted(CREATORS))
@pytest.mark.parametrize("dev", [None, "cpu", "cpu:0", tg.device("cpu"), tg.device("cpu", 0)])
def test_the_cpu_is_accepted_everywhere(name, dev):
    t = CREATORS[name](tg, device=dev)
    assert t.device == tg.device("cpu")
    assert t.device.type == "cpu" and str(t.device) == "cpu"


@pytest.mark.parametrize("name", sorted(CREATORS))
def test_cuda_is_refused_as_pytorch_without_cuda(name):
    for dev in ("cuda", "cuda:0", tg.device("cuda")):
        with pytest.raises(AssertionError, match="^Torch not compiled with CUDA enabled$"):
            CREATORS[name](tg, device=dev)
    with pytest.raises(RuntimeError, match="mps"):
        CREATORS[name](tg, device="mps")
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda, .* device type at start of device string: gpu"):
        CREATORS[name](tg, device="gpu")


@pytest.mark.parametrize("name", sorted(CREATORS))
def test_devices_and_errors_as_pytorch(name):
    torch = pytest.importorskip("torch")
    t = CREATORS[name](torch, device="cpu")
    m = CREATORS[name](tg, device="cpu")
    assert list(m.shape) == list(t.shape)
    for dev in ("cuda", "cuda:0", "gpu", "cuda:x", 1):
        with pytest.raises(Exception) as te:
            CREATORS[name](torch, device=dev)
        with pytest.raises(Exception) as me:
            CREATORS[name](tg, device=dev)
        assert type(me.value) is type(te.value), dev
        assert str(me.value) == str(te.value), dev


def test_device_object():
    d = tg.device("cpu")
    assert repr(d) == "device(type='cpu')"
    assert repr(tg.device("cpu:0")) == "device(type='cpu', index=0)"
    assert repr(tg.device("cpu", 0)) == "device(type='cpu', index=0)"
    assert d == tg.device("cpu") and d != tg.device("cpu", 0)
    assert d != "cpu"       # (as torch.device: a string is not a device)
    assert str(d) == "cpu" and d.type == "cpu" and d.index is None
    assert tg.tensor(1.0).device == d and tg.tensor(1.0).device.type == "cpu"
    assert tg.device(d) == d
    assert hash(tg.device("cpu")) == hash(d)
    assert not tg.tensor(1.0).is_cuda


def test_device_object_as_pytorch():
    torch = pytest.importorskip("torch")
    for args in [("cpu",), ("cpu:0",), ("cpu", 0), ("cuda",), ("cuda:1",), ("meta",)]:
        assert repr(tg.device(*args)) == repr(torch.device(*args))
        assert str(tg.device(*args)) == str(torch.device(*args))
    assert (tg.device("cpu") == "cpu") == (torch.device("cpu") == "cpu")
    for bad in ["gpu", "cuda:x", "cuda:-1"]:
        with pytest.raises(RuntimeError) as te:
            torch.device(bad)
        with pytest.raises(RuntimeError) as me:
            tg.device(bad)
        assert str(me.value) == str(te.value)


def test_cuda_namespace():
    assert tg.cuda.is_available() is False
    assert tg.cuda.device_count() == 0
    assert tg.cuda.is_initialized() is False
    assert tg.cuda.manual_seed(0) is None and tg.cuda.manual_seed_all(0) is None
    with pytest.raises(AssertionError, match="^Torch not compiled with CUDA enabled$"):
        tg.cuda.current_device()


def test_cuda_namespace_as_pytorch():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():      # (a CUDA build of PyTorch: tapegrad still has no device)
        assert tg.cuda.is_available() is False and tg.cuda.device_count() == 0
        return
    assert tg.cuda.is_available() == torch.cuda.is_available()
    assert tg.cuda.device_count() == torch.cuda.device_count()
    with pytest.raises(AssertionError) as te:
        torch.cuda.current_device()
    with pytest.raises(AssertionError) as me:
        tg.cuda.current_device()
    assert str(me.value) == str(te.value)


# -- Tensor.to / cpu / cuda -----------------------------------------------------------------
def test_to_forms():
    x = tg.tensor([1.5, 2.5], requires_grad=True)
    assert x.to("cpu") is x and x.to(tg.device("cpu")) is x and x.cpu() is x
    assert x.to(tg.float64) is x
    y = x.to(tg.float32)
    assert y.dtype == np.float32 and y.tolist() == [1.5, 2.5]
    z = x.to("cpu", tg.int64)
    assert z.dtype == np.int64 and z.tolist() == [1, 2]
    w = x.to(tg.zeros(1, dtype=tg.int32))
    assert w.dtype == np.int32
    assert x.to(device="cpu", dtype=tg.float32).dtype == np.float32
    c = x.to("cpu", copy=True)
    assert c is not x and c.tolist() == x.tolist()
    # the cast is recorded: the gradient flows back in float64
    (y * 2).sum().backward()
    assert x.grad.dtype == np.float64 and x.grad.tolist() == [2.0, 2.0]


def test_to_other_devices_refused():
    x = tg.ones(2)
    with pytest.raises(AssertionError, match="^Torch not compiled with CUDA enabled$"):
        x.cuda()
    with pytest.raises(AssertionError, match="^Torch not compiled with CUDA enabled$"):
        x.to("cuda")
    with pytest.raises(AssertionError, match="^Torch not compiled with CUDA enabled$"):
        x.to("cuda:0", tg.float32)
    with pytest.raises(RuntimeError, match="device string: gpu"):
        x.to("gpu")


def test_to_as_pytorch():
    torch = pytest.importorskip("torch")
    a = np.array([1.5, -2.5])
    for args, kw in [(("cpu",), {}), ((torch.float32,), {}), (("cpu", torch.int64), {}),
                     ((), {"dtype": torch.int32}), ((), {"device": "cpu", "dtype": torch.float32})]:
        t = torch.tensor(a).to(*args, **kw)
        targs = tuple(getattr(tg, str(v).split(".")[-1]) if isinstance(v, torch.dtype) else v for v in args)
        tkw = {k: getattr(tg, str(v).split(".")[-1]) if isinstance(v, torch.dtype) else v for k, v in kw.items()}
        m = tg.tensor(a).to(*targs, **tkw)
        assert str(m.dtype) == str(t.dtype).split(".")[-1]
        np.testing.assert_array_equal(m.numpy(), t.numpy())
    for call in (lambda x: x.cuda(), lambda x: x.to("cuda")):
        with pytest.raises(AssertionError) as te:
            call(torch.ones(1))
        with pytest.raises(AssertionError) as me:
            call(tg.ones(1))
        assert str(me.value) == str(te.value)


# -- as_tensor / asarray / from_numpy / clone ---------------------------------------------------
def test_from_numpy_of_a_transposed_array_shares_and_differentiates():
    a = np.arange(6.0).reshape(2, 3).T
    t = tg.from_numpy(a).requires_grad_()
    (t * t).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), 2 * a)
    with tg.no_grad():
        t.mul_(10)
    assert a[1, 0] == 10.0                  # (written through)
    assert tg.from_numpy(np.arange(3.0)[::-1]).tolist() == [2.0, 1.0, 0.0]    # (negative stride: a copy)


def test_from_numpy_shares_memory():
    a = np.arange(4.0)
    t = tg.from_numpy(a)
    a[0] = 9.0
    assert t.tolist() == [9.0, 1.0, 2.0, 3.0]
    t.add_(1)
    assert a.tolist() == [10.0, 2.0, 3.0, 4.0]
    assert tg.from_numpy(np.arange(3, dtype=np.int32)).dtype == np.int32
    with pytest.raises(TypeError, match="expected np.ndarray"):
        tg.from_numpy([1, 2])


def test_as_tensor_shares_memory_where_pytorch_does():
    a = np.arange(3.0)
    t = tg.as_tensor(a)
    t[0] = 5.0
    assert a[0] == 5.0
    u = tg.as_tensor(a, dtype=tg.float32)       # another dtype: a copy
    u[0] = 7.0
    assert a[0] == 5.0 and u.dtype == np.float32
    x = tg.ones(3)
    assert tg.as_tensor(x) is x and tg.as_tensor(x, dtype=tg.float64) is x
    y = tg.as_tensor(x, dtype=tg.float32)
    assert y.dtype == np.float32 and y is not x
    assert tg.as_tensor([1, 2]).dtype == np.int64
    assert tg.as_tensor([1.0, 2]).dtype == np.float64     # (tapegrad's default float)
    assert tg.as_tensor(3).dtype == np.int64 and tg.as_tensor(3).ndim == 0
    with pytest.raises(TypeError):
        tg.as_tensor(a, tg.float32)         # dtype is keyword-only, as in PyTorch


def test_as_tensor_of_a_tensor_records_the_cast():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = tg.as_tensor(x, dtype=tg.float32)
    (y * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_asarray_copy_modes():
    a = np.arange(3.0)
    t = tg.asarray(a)
    t[0] = 9.0
    assert a[0] == 9.0
    c = tg.asarray(a, copy=True)
    c[0] = 11.0
    assert a[0] == 9.0
    with pytest.raises(ValueError, match="can't alias arbitrary sequence into a tensor."):
        tg.asarray([1, 2], copy=False)
    with pytest.raises(ValueError, match="can't alias tensor with dtype 'Double' into dtype 'Float'."):
        tg.asarray(a, dtype=tg.float32, copy=False)
    x = tg.ones(3, requires_grad=True)
    assert tg.asarray(x) is x
    y = tg.asarray(x, requires_grad=False)
    assert not y.requires_grad and np.shares_memory(y._data, x._data)
    z = tg.asarray(a, requires_grad=True)
    assert z.requires_grad and z.is_leaf
    with pytest.raises(ValueError, match="can't alias tensor with dtype 'Double' into dtype 'Float'."):
        tg.asarray(x, dtype=tg.float32, copy=False)
    w = tg.asarray(x, copy=True)        # (a recorded copy, as PyTorch's)
    assert w is not x and not np.shares_memory(w._data, x._data) and w.requires_grad
    assert w.grad_fn.name() == "CloneBackward0"
    (w * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_asarray_of_a_tensor_as_pytorch():
    torch = pytest.importorskip("torch")
    for kw in ({}, {"copy": True}, {"dtype": "float32"}, {"requires_grad": True, "copy": True},
               {"copy": True, "requires_grad": False}, {"dtype": "float32", "requires_grad": False}):
        got = []
        for m in (torch, tg):
            x = m.ones(2, dtype=m.float64, requires_grad=True)
            k = dict(kw, dtype=getattr(m, kw["dtype"])) if "dtype" in kw else kw
            y = m.asarray(x, **k)
            got.append((y is x, y.requires_grad, y.is_leaf, None if y.grad_fn is None else y.grad_fn.name(),
                        str(y.dtype).split(".")[-1], np.shares_memory(y.detach().numpy(), x.detach().numpy())))
        assert got[0] == got[1], kw


def test_asarray_as_pytorch():
    torch = pytest.importorskip("torch")
    a = np.arange(3.0)
    for obj, kw in [(a, {}), (a, {"copy": True}), ([1, 2], {}), (np.arange(3, dtype=np.int16), {}),
                    (np.float32(2.5), {})]:
        t = torch.asarray(obj, **kw)
        m = tg.asarray(obj, **kw)
        assert str(m.dtype) == str(t.dtype).split(".")[-1]
        assert list(m.shape) == list(t.shape)
        np.testing.assert_array_equal(m.numpy(), t.numpy())
    for obj, kw in [([1, 2], {"copy": False}), (a, {"copy": False, "dtype": "float32"}),
                    ("x", {"copy": False})]:
        tkw = dict(kw, dtype=torch.float32) if "dtype" in kw else kw
        mkw = dict(kw, dtype=tg.float32) if "dtype" in kw else kw
        with pytest.raises(ValueError) as te:
            torch.asarray(obj, **tkw)
        with pytest.raises(ValueError) as me:
            tg.asarray(obj, **mkw)
        assert str(me.value) == str(te.value)
    # sharing: what PyTorch shares, tapegrad shares (contiguous, transposed, strided arrays)
    for src in (a, np.arange(6.0).reshape(2, 3).T, np.arange(8.0)[::2], np.arange(4, dtype=np.int32)):
        for make in (lambda m, v: m.asarray(v), lambda m, v: m.as_tensor(v), lambda m, v: m.from_numpy(v),
                     lambda m, v: m.asarray(v, copy=False), lambda m, v: m.tensor(v),
                     lambda m, v: m.asarray(v, copy=True)):
            torch_shares = np.shares_memory(make(torch, src).numpy(), src)
            t = make(tg, src)
            assert np.shares_memory(t._data, src) == torch_shares
            np.testing.assert_array_equal(t.numpy(), src)
    neg = np.arange(4.0)[::-1]
    with pytest.raises(ValueError) as te:
        torch.asarray(neg, copy=False)
    with pytest.raises(ValueError) as me:
        tg.asarray(neg, copy=False)
    assert str(me.value) == str(te.value)


def test_clone():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x.clone()
    assert y is not x and not np.shares_memory(x._data, y._data)
    assert y.grad_fn.name() == "CloneBackward0"
    (y * y).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]
    assert tg.clone(x).tolist() == [1.0, 2.0]


# -- dtypes of the filled creators, as PyTorch (tapegrad's default float is float64) --------------
def test_creation_dtypes_as_pytorch():
    torch = pytest.importorskip("torch")
    cases = [lambda m: m.full((2,), 3), lambda m: m.full((2,), True), lambda m: m.arange(3),
             lambda m: m.arange(0, 1, 0.25), lambda m: m.zeros(2, dtype=m.int32), lambda m: m.eye(2, 3),
             lambda m: m.randint(3, (2,)), lambda m: m.randperm(4), lambda m: m.randperm(4, dtype=m.float32),
             lambda m: m.zeros_like(m.ones(2, dtype=m.int16)), lambda m: m.full_like(m.ones(2, dtype=m.int8), 2),
             lambda m: m.randint_like(m.ones(2, dtype=m.int32), 3), lambda m: m.rand_like(m.ones(2, dtype=m.float32))]
    for case in cases:
        t, m = case(torch), case(tg)
        td = str(t.dtype).split(".")[-1]
        if td == "float32" and str(m.dtype) == "float64":
            continue        # (the default float)
        assert str(m.dtype) == td
        assert list(m.shape) == list(t.shape)


def test_requires_grad_on_creators():
    for name in ("zeros", "ones", "rand", "randn", "full", "eye", "linspace", "arange", "tensor"):
        kw = {"dtype": tg.float64} if name in ("arange", "full") else {}
        t = CREATORS[name](tg, requires_grad=True, **kw)
        assert t.requires_grad and t.is_leaf


def test_out_is_written():
    """out= as PyTorch's: the result is written into ``out``, which is returned."""
    out = tg.ones(2)
    assert tg.zeros(2, out=out) is out and out.tolist() == [0.0, 0.0]
    out = tg.zeros(3)
    assert tg.arange(3, out=out) is out and out.tolist() == [0.0, 1.0, 2.0]
    out = tg.zeros(3, dtype=tg.int64)
    assert sorted(tg.randperm(3, out=out).tolist()) == [0, 1, 2]
    out = tg.zeros(2)
    tg.manual_seed(0)
    tg.randn(2, out=out)
    tg.manual_seed(0)
    assert out.tolist() == tg.randn(2).tolist()


# -- nn.Module.to / cpu / cuda / double / float ----------------------------------------------------------
def test_module_to_casts_in_place():
    tg.manual_seed(0)
    net = tg.nn.Sequential(tg.nn.Linear(3, 2, device="cpu"), tg.nn.Tanh())
    opt = tg.optim.SGD(net.parameters(), lr=0.1)
    net(tg.randn(4, 3)).sum().backward()
    w = net[0].weight
    before = w.detach().numpy().copy()
    assert net.to("cpu") is net and net.cpu() is net and net.to(tg.device("cpu")) is net
    assert net.to(tg.float32) is net
    assert net[0].weight is w and w.dtype == np.float32 and w.grad.dtype == np.float32
    assert isinstance(w, tg.nn.Parameter) and w.requires_grad
    np.testing.assert_array_equal(w.detach().numpy(), before.astype(np.float32))
    out = net(tg.randn(4, 3, dtype=tg.float32))
    assert out.dtype == np.float32
    opt.step()                      # (the optimizer holds the same, cast, parameters)
    assert w.dtype == np.float32
    net.double()
    assert w.dtype == np.float64
    net.to("cpu", tg.float32)
    assert w.dtype == np.float32
    net.to(tg.zeros(1))
    assert w.dtype == np.float64


def test_module_to_errors_as_pytorch():
    torch = pytest.importorskip("torch")
    for call in (lambda m: m.nn.Linear(2, 2).to("cuda"), lambda m: m.nn.Linear(2, 2).cuda(),
                 lambda m: m.nn.Linear(2, 2).to(m.int64), lambda m: m.nn.Linear(2, 2, device="cuda"),
                 lambda m: m.nn.Linear(2, 2).to("gpu")):
        with pytest.raises(Exception) as te:
            call(torch)
        with pytest.raises(Exception) as me:
            call(tg)
        assert type(me.value) is type(te.value) and str(me.value) == str(te.value)


def test_new_methods_and_logspace_as_pytorch():
    torch = pytest.importorskip("torch")
    for case in (lambda m, x: x.new_zeros(3), lambda m, x: x.new_zeros((2, 3)), lambda m, x: x.new_zeros(2, 3),
                 lambda m, x: x.new_ones(2, dtype=m.int32), lambda m, x: x.new_full((2,), 5),
                 lambda m, x: x.new_tensor([1, 2]), lambda m, x: x.new_empty(0),
                 lambda m, x: x.new_ones(2, requires_grad=True), lambda m, x: x.new_tensor([1.5], dtype=m.int64),
                 lambda m, x: m.logspace(0, 2, 5, dtype=m.float64), lambda m, x: m.logspace(-1, 3, 7, base=2,
                                                                                            dtype=m.float64),
                 lambda m, x: m.logspace(0, 3, 4, dtype=m.int64), lambda m, x: m.logspace(1, 1, 1, dtype=m.float64),
                 lambda m, x: m.logspace(0, 1, 0, dtype=m.float64)):
        t = case(torch, torch.ones(2, dtype=torch.float64, requires_grad=True))
        m = case(tg, tg.ones(2, requires_grad=True))
        assert str(m.dtype) == str(t.dtype).split(".")[-1]
        assert list(m.shape) == list(t.shape) and m.requires_grad == t.requires_grad and m.is_leaf
        if t.numel():
            np.testing.assert_allclose(m.detach().numpy(), t.detach().numpy(), rtol=1e-15)
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        tg.ones(1).new_zeros(2, device="cuda")
