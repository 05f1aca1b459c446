"""The sweep calls the elementwise kernels by the addresses of their C entries
(``_jit.c_entry``, ``_jit.c_caller``; ``kernels.sweep.ENTRIES``), so that no
variant of the sweep compiles them again; with NUMBA_BOUNDSCHECK=1 it calls them
directly.  Both calls must give the same bits."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tapegrad import _jit
from tapegrad.kernels import sweep as K

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOUNDSCHECK = K.by_call()


def _backward(a, b, w):
    import tapegrad as tg
    x = tg.tensor(a, requires_grad=True)
    y = tg.tensor(b, requires_grad=True)
    s = tg.tensor(w, requires_grad=True)
    # unary ops with parameters, fused binary (same shapes), broadcast binary (aux words),
    # a scalar operand (stride 0), one gradient wanted (the other input a constant)
    loss = ((x * y).sin() + (x ** 2) * s + tg.atan2(x, y.reshape(4, 3)[:1].expand(4, 3).reshape(12))
            + (y - 0.5).clamp(-0.3, 0.7) * tg.tensor(np.linspace(1, 2, 12))).sum()
    loss.backward()
    return x.grad.numpy(), y.grad.numpy(), s.grad.numpy()


def _inputs():
    rng = np.random.default_rng(5)
    return rng.normal(size=12), rng.normal(size=12), np.array(0.7)


def _in_mode(mode):
    from tapegrad.autograd import engine
    old = engine.INTERPRET[0]
    engine.INTERPRET[0] = mode
    try:
        return _backward(*_inputs())
    finally:
        engine.INTERPRET[0] = old


def test_the_compiled_sweep_calls_the_elementwise_kernels_by_address():
    _jit.load()
    got = _in_mode("never")
    if BOUNDSCHECK:
        assert (K.ENTRIES == 0).all()       # called directly: no C entry made
    else:
        assert (K.ENTRIES[:2] != 0).all()
        ue = _jit.c_entry(K._gen.unary_reverse_entry, K.codegen.UNARY_ENTRY_ARGS)
        be = _jit.c_entry(K._gen.binary_reverse_entry, K.codegen.BINARY_ENTRY_ARGS)
        assert list(K.ENTRIES[:2]) == [ue.address, be.address]
    want = _in_mode("always")       # the interpreted reverse
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-14, atol=1e-15)


@pytest.mark.skipif(not BOUNDSCHECK, reason="compiles the kernels in a child: once, in the NUMBA_BOUNDSCHECK=1 pass")
def test_the_direct_and_the_by_address_calls_give_the_same_bits(tmp_path):
    # here (NUMBA_BOUNDSCHECK=1) the sweep calls the kernels directly, every index checked;
    # the same backward in a child in the default mode calls them by address, in a cache of
    # that mode (a bounds-checked kernel is not one for the default mode's cache): CI names
    # the README run's, which it runs beside this one (TAPEGRAD_TEST_DEFAULT_MODE_CACHE);
    # else an empty one, where the child compiles them
    code = textwrap.dedent("""
        import numpy as np, sys
        sys.path.insert(0, %r)
        from tests.test_kernel_entries import _backward, _inputs
        from tapegrad import _jit
        from tapegrad.kernels import sweep as K
        _jit.load()
        g = _backward(*_inputs())
        print(K.by_call(), *(K.ENTRIES[:2] != 0).tolist(), *[v.tobytes().hex() for v in g])
    """ % ROOT)
    env = dict(os.environ, NUMBA_BOUNDSCHECK="0", TAPEGRAD_INTERPRET="never", PYTHONPATH=ROOT,
               NUMBA_CACHE_DIR=os.environ.get("TAPEGRAD_TEST_DEFAULT_MODE_CACHE") or str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout.split()
    assert out[:3] == ["False", "True", "True"]         # by address: the entries were made
    _jit.load()
    here = _in_mode("never")
    assert (K.ENTRIES == 0).all()
    assert out[3:] == [v.tobytes().hex() for v in here]


@pytest.mark.skipif(os.environ.get("TAPEGRAD_INTERPRET") == "always", reason="the compiled sweep's entries")
def test_the_second_tables_kernels_are_made_when_a_backward_meets_one_of_its_ops():
    # in a new process: a backward of the common ops makes the first table's entries
    # only; one with hypot and softplus (UNARY2, BINARY2) makes the second's too
    code = textwrap.dedent("""
        import numpy as np, sys
        sys.path.insert(0, %r)
        import tapegrad as tg
        from tapegrad import _jit
        from tapegrad.kernels import sweep as K
        _jit.load()
        x = tg.tensor(np.linspace(-1, 1, 7), requires_grad=True)
        (x.sin() * x).sum().backward()
        print(*(K.ENTRIES != 0).astype(int).tolist())
        x.grad = None
        (tg.hypot(x, x.exp()) + tg.nn.functional.softplus(x * 3.0, 2.0, 1.5)).sum().backward()
        print(*(K.ENTRIES != 0).astype(int).tolist())
        print(*x.grad.numpy().tobytes().hex().split())
    """ % ROOT)
    env = dict(os.environ, TAPEGRAD_INTERPRET="never", PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    first, second, grad = r.stdout.splitlines()
    if BOUNDSCHECK:
        assert first == second == "0 0 0 0"
    else:
        assert first == "1 1 0 0" and second == "1 1 1 1"
    x = np.linspace(-1, 1, 7)
    e = np.exp(x)
    h = np.hypot(x, e)
    z = np.exp(2.0 * 3.0 * x)
    want = (x + e * e) / h + np.where(2.0 * 3.0 * x > 1.5, 3.0, 3.0 * z / (z + 1.0))
    np.testing.assert_allclose(np.frombuffer(bytes.fromhex(grad)), want, rtol=1e-14)


def test_the_caller_converts_each_argument_to_the_entry_types():
    _jit.load()
    import numba

    def target(out_address, i, x, flag):
        out = numba.carray(_jit.address_as_pointer(out_address), 3, np.float64)
        out[0] = i
        out[1] = x
        out[2] = flag

    entry = numba.cfunc(numba.types.void(numba.types.int64, numba.types.int64, numba.types.float64,
                                         numba.types.int64))(target)
    call = _jit.c_caller(("int64", "int64", "float64", "int64"))

    @numba.njit
    def caller(address, out, i, x, flag):
        call(address, (out.ctypes.data, i, x, flag))

    out = np.zeros(3)
    caller(entry.address, out, np.int32(7), 2.5, True)      # int32 -> int64, bool -> int64
    assert out.tolist() == [7.0, 2.5, 1.0]
    caller(entry.address, out, 3, np.float32(0.25), False)
    assert out.tolist() == [3.0, 0.25, 0.0]
