"""tg.tensor's large copies in recycled buffers (core/buffers.py): memory reused only
when nothing refers to it, the values always the copy's, the kept bytes bounded."""
import threading

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core import buffers


@pytest.fixture
def small(monkeypatch):
    """Recycle from 4 KiB, so that the tests' arrays are small; nothing kept before or after."""
    monkeypatch.setattr(buffers, "RECYCLE_FROM", 4096)
    monkeypatch.setattr(buffers, "_KEPT", [])
    yield
    buffers._KEPT.clear()


def _address(t):
    return t.numpy(force=True).__array_interface__["data"][0]


def _arr(seed, shape=(64, 16)):
    return np.random.default_rng(seed).standard_normal(shape)


def test_a_copy_reuses_the_memory_of_one_nothing_uses(small):
    a = tg.tensor(_arr(0))
    where = _address(a)
    del a
    b = tg.tensor(_arr(1))
    assert _address(b) == where
    assert b.tolist() == _arr(1).tolist()
    assert tg.memory_stats()["copy_buffer_bytes"] == 64 * 16 * 8
    assert tg.memory_stats()["idle_copy_buffer_bytes"] == 0
    del b
    assert tg.memory_stats()["idle_copy_buffer_bytes"] == 64 * 16 * 8


@pytest.mark.parametrize("holder", ["tensor", "numpy", "view", "tape", "detached", "memoryview"])
def test_memory_something_still_refers_to_is_never_handed_out(small, holder):
    x = tg.tensor(_arr(0), requires_grad=(holder == "tape"))
    keep = {"tensor": lambda: x,
            "numpy": lambda: x.numpy(force=True),
            "view": lambda: x.numpy(force=True)[::3, 1:],
            "tape": lambda: (x * x).sum(),        # the tape saves x's array for backward
            "detached": lambda: x.detach()[2],
            "memoryview": lambda: memoryview(x.numpy(force=True))}[holder]()
    where = _address(x)
    del x
    y = tg.tensor(_arr(1))
    assert _address(y) != where
    assert y.tolist() == _arr(1).tolist()
    if holder == "tape":
        keep.backward()
    # what was kept still holds the first copy's values
    first = _arr(0)
    if holder in ("tensor", "numpy"):
        assert np.array_equal(np.asarray(keep.detach().numpy() if holder == "tensor" else keep), first)
    elif holder == "view":
        assert np.array_equal(keep, first[::3, 1:])
    elif holder == "detached":
        assert keep.tolist() == first[2].tolist()
    elif holder == "memoryview":
        assert np.array_equal(np.asarray(keep), first)


def test_casts_layouts_and_integers_copied_exactly(small):
    x = _arr(2, (40, 30))
    f32 = tg.tensor(x, dtype=tg.float32)
    assert f32.dtype == tg.float32 and np.array_equal(f32.numpy(), x.astype(np.float32))
    fort = tg.tensor(np.asfortranarray(x))
    assert fort.numpy().flags.c_contiguous and np.array_equal(fort.numpy(), x)
    ints = np.arange(2000, dtype=np.int64).reshape(40, 50) - 1000
    it = tg.tensor(ints)
    assert it.dtype == tg.int64 and np.array_equal(it.numpy(), ints)
    assert tg.tensor(ints, dtype=tg.float64).tolist() == ints.astype(np.float64).tolist()
    strided = tg.tensor(x[:, ::2])
    assert strided.shape == (40, 15) and np.array_equal(strided.numpy(), x[:, ::2])
    # a copy of a tensor's own buffer, made while it is in use, is a separate copy
    again = tg.tensor(fort.numpy())
    assert _address(again) != _address(fort) and np.array_equal(again.numpy(), x)
    # and the gradient through a recycled leaf is the ordinary one
    w = tg.tensor(x, requires_grad=True)
    (w * w).sum().backward()
    assert np.array_equal(w.grad.numpy(), 2 * x)


def test_the_kept_buffers_are_bounded_and_released(small, monkeypatch):
    monkeypatch.setattr(buffers, "KEEP_BYTES", 64 * 1024)
    held = [tg.tensor(np.ones(n)) for n in (1000, 1200, 1400, 1600, 1800, 2000)]
    kept = tg.memory_stats()["copy_buffer_bytes"]
    assert len(buffers._KEPT) <= buffers.KEEP and kept <= 64 * 1024
    assert [t.sum().item() for t in held] == [1000, 1200, 1400, 1600, 1800, 2000]
    big = tg.tensor(np.ones(9000))          # more than KEEP_BYTES: copied as usual, not kept
    assert tg.memory_stats()["copy_buffer_bytes"] == kept and big.sum().item() == 9000
    del held
    assert tg.memory_stats()["idle_copy_buffer_bytes"] == kept
    assert buffers.release() == kept
    assert tg.memory_stats()["copy_buffer_bytes"] == 0


def test_threads_copying_at_once_get_their_own_buffers(small):
    out, errors = {}, []

    def work(k):
        try:
            for i in range(200):
                t = tg.tensor(np.full((32, 32), float(k * 1000 + i)))
                if not np.all(t.numpy() == k * 1000 + i):
                    errors.append((k, i))
                out[k] = t
        except Exception as e:      # (reported below)
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert sorted(t.numpy()[0, 0] for t in out.values()) == [199.0, 1199.0, 2199.0, 3199.0]
    assert len({_address(t) for t in out.values()}) == 4
