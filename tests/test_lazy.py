"""Numba is loaded lazily: a script taking a few gradients never imports it, small
backward passes are interpreted in NumPy until the compiled kernels are worth
loading, and the two paths give the same gradients and the same semantics."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.nn.functional as F
from tapegrad import _jit
from tapegrad.autograd import engine


def _run(code, **env):
    e = dict(os.environ)
    e.pop("TAPEGRAD_INTERPRET", None)
    e.update(env)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=e,
                       timeout=900)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_a_few_gradients_never_import_numba_or_scipy():
    g, mods = _run("""
        import sys
        import tapegrad as tg
        x = tg.tensor([1.0, 2.0], requires_grad=True)
        (x.sin() * x).sum().backward()
        print(x.grad.tolist())
        print(sorted(m for m in ("numba", "llvmlite", "scipy") if m in sys.modules))
    """)
    np.testing.assert_allclose(eval(g), [np.sin(1.0) + np.cos(1.0), np.sin(2.0) + 2 * np.cos(2.0)], rtol=1e-15)
    assert mods == "[]"


def test_kernels_load_once_interpreting_cost_as_much():
    out = _run("""
        import sys
        import numba
        import tapegrad as tg
        from tapegrad import _jit
        from tapegrad.autograd import engine
        from tapegrad.kernels import sweep
        engine.INTERPRET_BUDGET_S = 1e-12
        x = tg.tensor([1.0, 2.0], requires_grad=True)
        (x * x).sum().backward()            # interpreted: nothing spent yet
        print(_jit.loaded())
        (x * x * x).sum().backward()        # the budget is spent: the kernels load
        print(_jit.loaded())
        print(x.grad.tolist())
        D = numba.core.registry.CPUDispatcher
        print(isinstance(sweep.run, D), isinstance(engine._addr, D), isinstance(sweep.mark, D))
    """)
    assert out == ["False", "True", "[5.0, 16.0]", "True True True"]


def test_long_tape_and_never_mode_load_at_once():
    code = """
        import tapegrad as tg
        from tapegrad import _jit
        y = w = tg.tensor([0.3], requires_grad=True)
        for _ in range(%d):
            y = y.sin() * w
        y.sum().backward()
        print(_jit.loaded(), round(w.grad.item(), 12))
    """
    long_ = _run(code % 2100)                     # 4,201 entries: over INTERPRET_MAX_ENTRIES
    short = _run(code % 3)
    never = _run(code % 3, TAPEGRAD_INTERPRET="never")
    assert long_[0].startswith("True")
    assert short[0].startswith("False") and never[0].startswith("True")
    assert short[0].split()[1] == never[0].split()[1]


def test_stand_ins_are_replaced_everywhere_once_loaded():
    _jit.load()
    assert _jit.loaded() and not _jit._PENDING
    for name, mod in list(sys.modules.items()):
        if name.startswith("tapegrad") and mod is not None:
            for k, v in vars(mod).items():
                assert not isinstance(v, (_jit._Kernel, _jit._Lazy)), (name, k)
    assert _jit.jit(lambda a: a * 2)(3) == 6       # after loading, jit gives a dispatcher at once


# --- the interpreted and the compiled backward agree ---------------------------------

def _leaves(rng, *shapes, dtype=np.float64):
    return [tg.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True) for s in shapes]


CASES = {
    "broadcast arithmetic": (((3, 4), (4,), (3, 1)),
                             lambda a, b, c: ((a * b - c) / (1.5 + b.abs()) + a ** 2 - 2.0 / (1 + c * c)).sum()),
    "unary": (((5,),), lambda a: (a.exp() + a.sigmoid() + a.tanh() + a.sin() * a.cos() + a.abs().sqrt()
                                  + a.relu() + (a.abs() + 1).log() + a.clamp(-0.5, 0.5) + a.expm1()).sum()),
    "reductions": (((3, 4, 5),), lambda a: a.sum(1).prod() * 1e-3 + a.mean((0, 2)).sum() + a.var(2).sum()
                                          + a.std().sum() + a.amax(1).sum() + a.logsumexp(0).sum()
                                          + a.max(dim=2)[0].sum() + a.max()),
    "softmax": (((4, 6),), lambda a: (a.softmax(1) * a).sum() + a.log_softmax(0)[1:, ::2].sum()),
    "indexing": (((6, 3),), lambda a: a[np.array([0, 2, 2, 5])].sum() + (a[a > 0] ** 2).sum()
                                      + a[1:5:2, None, ..., 1].sum() + a.t()[2].sum()),
    "shape": (((2, 3), (2, 3)), lambda a, b: (tg.cat([a, b], 1).reshape(3, 4).permute(1, 0)
                                              * tg.stack([a, b]).flatten()[:12].reshape(4, 3)).sum()
                                             + a.unsqueeze(0).expand(4, 2, 3).sum()),
    "matmul": (((2, 3, 4), (4, 5), (5,)), lambda a, b, v: ((a @ b) @ v).sum() + tg.dot(v, v)
                                                          + (a[0].t() @ a[1]).sum()),
    "where/maximum": (((5,), (5,)), lambda a, b: (tg.where(a > b, a * b, b) + tg.maximum(a, b)
                                                  + tg.minimum(a, 0.1)).sum()),
    "cross_entropy": (((8, 5),), lambda a: F.cross_entropy(a, tg.tensor(np.array([0, 1, 4, 4, 2, 3, 0, 1])))),
    "in place": (((4,),), lambda a: _inplace(a)),
}


def _inplace(a):
    y = a * 2
    y[1:3] = a[:2] ** 2
    y *= a
    return y.sum()


def _grads(mode, monkeypatch, fn, leaves):
    monkeypatch.setattr(engine, "INTERPRET", [mode])
    for t in leaves:
        t.grad = None
    loss = fn(*leaves)
    loss.backward()
    return loss.item(), [t.grad.numpy().copy() for t in leaves]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", list(CASES))
def test_interpreted_backward_agrees_with_the_sweep(name, dtype, monkeypatch):
    shapes, fn = CASES[name]
    leaves = _leaves(np.random.default_rng(len(name)), *shapes, dtype=dtype)
    v1, g1 = _grads("always", monkeypatch, fn, leaves)
    v2, g2 = _grads("never", monkeypatch, fn, leaves)
    assert v1 == v2
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for a, b in zip(g1, g2):
        assert a.dtype == b.dtype == dtype
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    if dtype == np.float64:     # and both are the true gradient
        assert tg.autograd.gradcheck(fn, leaves, eps=1e-6, atol=1e-5, rtol=1e-4)


def _semantics(monkeypatch, mode):
    """hooks, retain_grad, inputs=, autograd.grad, retain_graph and its error, as one record."""
    monkeypatch.setattr(engine, "INTERPRET", [mode])
    out = []
    x = tg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    w = tg.tensor([0.5, 0.25, 2.0], requires_grad=True)
    h = x * w
    h.retain_grad()
    h.register_hook(lambda g: g * 10)
    x.register_hook(lambda g: g + 1)
    loss = (h.sin() * x).sum()
    loss.backward(retain_graph=True)
    out += [x.grad.numpy().copy(), w.grad.numpy().copy(), h.grad.numpy().copy()]
    loss.backward(inputs=[w])                       # accumulates into w only
    out += [x.grad.numpy().copy(), w.grad.numpy().copy()]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    y = (x * x * w).sum()
    z = (x.exp() * 2).sum()
    gx, gw = tg.autograd.grad([y, z], [x, w], grad_outputs=[tg.tensor(2.0), tg.tensor(0.5)])
    out += [gx.numpy(), gw.numpy()]
    u = tg.tensor([1.0, 2.0], requires_grad=True)
    unused, = tg.autograd.grad((x * 3).sum(), [u], allow_unused=True)
    out.append(unused)
    return out


def test_interpreted_semantics_match_the_sweep(monkeypatch):
    a = _semantics(monkeypatch, "always")
    b = _semantics(monkeypatch, "never")
    assert len(a) == len(b)
    for u, v in zip(a, b):
        if u is None or v is None:
            assert u is v is None
        else:
            np.testing.assert_allclose(u, v, rtol=1e-14, atol=1e-15)
    # the hook on h multiplies by 10, the one on x adds 1 to x's gradient
    x = np.array([1.0, -2.0, 3.0])
    w = np.array([0.5, 0.25, 2.0])
    dh = 10 * np.cos(x * w) * x
    np.testing.assert_allclose(a[0], dh * w + np.sin(x * w) + 1, rtol=1e-14)
    np.testing.assert_allclose(a[2], dh, rtol=1e-14)


@pytest.mark.parametrize("seed", range(20))
def test_strided_map_in_numpy_matches_the_kernel(seed):
    """``strided_map_np`` (Python callers, no Numba) against the compiled ``strided_map``."""
    from tapegrad.core.descriptors import strided_map, strided_map_np
    rng = np.random.default_rng(seed)
    nd = int(rng.integers(0, 5))
    shape = rng.integers(0 if seed % 7 == 0 else 1, 5, nd).tolist()
    strides = rng.integers(-3, 9, nd).tolist()
    off = int(rng.integers(0, 50))
    aux = np.array([7, 7, nd, off, *shape, *strides], np.int64)     # (two words of padding before it)
    want = strided_map(aux, 2)
    got = strided_map_np(aux, 2)
    assert got.dtype == np.int64 and got.shape == (int(np.prod(shape)),)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(strided_map_np([nd, off, *shape, *strides], 0), want)    # (a list of words)



@pytest.mark.parametrize("seed", range(4))
def test_strided_scatter_and_gather_add_match_the_map(seed):
    """The compiled ``strided_scatter_add`` / ``strided_gather_add`` (axes coalesced, the last
    two walked in loops, a broadcast axis before a short last one summed innermost) against
    the loop over ``strided_map``, to the bit: every element gets its terms in the map's
    order, overlapping, negative, zero strides and axes of length 1 included."""
    from tapegrad.core.descriptors import strided_gather_add, strided_map_np, strided_scatter_add
    rng = np.random.default_rng(seed)
    cases = [((384, 40, 3), (3, 0, 1), 0), ((40, 384, 3), (0, 3, 1), 0), ((50, 40, 3), (40, 1, 0), 0),
             ((6, 1, 5, 1), (5, 9, 1, 3), 2), ((), (), 4), ((7, 3), (0, -1), 2)]
    for _ in range(300):
        nd = int(rng.integers(0, 6))
        shape = rng.integers(1, 5, nd).tolist()
        strides = [int(rng.choice([0, 0, 1, 2, 3, -1, -2, 4, 6, 12])) for _ in range(nd)]
        cases.append((shape, strides, 0))
    for shape, strides, off in cases:
        off += sum(-st * (sh - 1) for sh, st in zip(shape, strides) if st < 0)     # (no negative index)
        aux = np.array([7, 7, len(shape), off, *shape, *strides], np.int64)       # (two words before it)
        m = strided_map_np(aux, 2)
        size = int(m.max()) + 1
        src, dst = rng.standard_normal(m.size), rng.standard_normal(size)
        want = dst.copy()
        for j in range(m.size):
            want[m[j]] += -0.5 * src[j]
        strided_scatter_add(dst, src, aux, 2, -0.5)
        np.testing.assert_array_equal(dst, want)
        src, dst = rng.standard_normal(size), rng.standard_normal(m.size)
        want = dst + src[m]
        strided_gather_add(dst, src, aux, 2)
        np.testing.assert_array_equal(dst, want)

@pytest.mark.parametrize("dims", [1, (0, 2), -1, (1, 2)])
def test_mean_over_dims_backward_is_g_over_count(dims, monkeypatch):
    """mean(dim)'s adjoint in the compiled sweep: every element its group's adjoint divided
    by the group's size, to the bit (one division per group, then gathered), on a
    transposed view too; and against PyTorch where installed."""
    if os.environ.get("TAPEGRAD_INTERPRET") != "always":
        monkeypatch.setattr(engine, "INTERPRET", ["never"])     # (the compiled sweep's kernel)
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((6, 5, 4))
    for base in (xv, xv.transpose(2, 1, 0).copy()):
        x = tg.tensor(base, requires_grad=True)
        y = x.mean(dims)
        g = rng.standard_normal(y.shape)
        y.backward(tg.tensor(g))
        axes = tuple(d % 3 for d in ((dims,) if isinstance(dims, int) else dims))
        count = int(np.prod([base.shape[a] for a in axes]))
        want = np.broadcast_to(np.expand_dims(g / count, axes), base.shape)
        np.testing.assert_array_equal(x.grad.numpy(), want)
        try:
            import torch
        except ImportError:
            continue
        xt = torch.tensor(base, requires_grad=True)
        xt.mean(dims).backward(torch.tensor(g))
        np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


def _inplace_hooks(monkeypatch, mode):
    """Hooks that change their gradient in place: the interpreted path's adjoints are
    shared (``a + b``) or broadcast views (after a sum), so each hook gets its own copy."""
    monkeypatch.setattr(engine, "INTERPRET", [mode])
    out = []
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    w = tg.tensor([3.0, 4.0], requires_grad=True)
    a, b = x * 1.0, w * 1.0
    a.register_hook(lambda g: g.mul_(10))          # a's adjoint is the one a + b gives b too
    (a + b).sum().backward()
    out += [x.grad.tolist(), w.grad.tolist()]
    y = (x * x).sum()
    y.register_hook(lambda g: g.mul_(3))            # the root's own seed
    x.grad = None
    y.backward()
    out.append(x.grad.tolist())
    v = tg.tensor([0.5, -1.0], requires_grad=True)
    v.register_hook(lambda g: g.add_(1))            # a leaf hook on a broadcast view
    seed = tg.tensor([1.0, 1.0])
    z = v * 2.0
    z.backward(seed)
    out += [v.grad.tolist(), seed.tolist()]
    return out


def test_hooks_changing_their_gradient_in_place(monkeypatch):
    want = [[10.0, 10.0], [1.0, 1.0], [6.0, 12.0], [3.0, 3.0], [1.0, 1.0]]
    assert _inplace_hooks(monkeypatch, "always") == want
    assert _inplace_hooks(monkeypatch, "never") == want


def test_unknown_interpret_mode_warns_and_uses_auto():
    e = dict(os.environ, TAPEGRAD_INTERPRET="off")
    r = subprocess.run([sys.executable, "-c", "import tapegrad.autograd.engine as e; print(e.INTERPRET[0])"],
                       capture_output=True, text=True, env=e, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "auto"
    assert "TAPEGRAD_INTERPRET='off' is not one of auto, always, never: using auto" in r.stderr


def test_threads_loading_the_kernels_at_once():
    out = _run("""
        import threading
        import tapegrad as tg
        res = [None] * 4
        def work(i):
            x = tg.tensor([1.0, float(i)], requires_grad=True)
            (x * x * x).sum().backward()       # every thread loads: one does, the others wait
            res[i] = x.grad.tolist()
        ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in ts: t.start()
        for t in ts: t.join()
        print(res)
    """, TAPEGRAD_INTERPRET="never")
    assert out == [str([[3.0, 3.0 * i * i] for i in range(4)])]
