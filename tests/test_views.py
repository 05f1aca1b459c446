"""Every op that makes a view or a strided copy (as_strided too), on random shapes of 0 to 4 dimensions
(sizes 0 to 4, so empty and one-element dimensions come often), against NumPy and,
when it is installed, PyTorch.

These ops are what the compiled kernels index by descriptors and index arrays without
bounds checks, so each case checks, besides values and gradients:

* every entry of the recorded tape passes its family's ``check_entry`` (its
  descriptors and indices lie inside the arrays they index);
* the gradient of ``sum(w * op(x))`` through the compiled and the interpreted backward,
  ``create_graph`` (the differentiable reverse: the gradient's own gradient with respect
  to ``w`` is ``op(v)`` for the direction ``v``), forward mode (``jvp`` gives ``op(v)``)
  and a replay by ``tg.compile`` on new inputs.

Every one of these ops selects elements, so one reference serves all: ``op`` applied
to the index grid ``arange(x.size).reshape(x.shape)`` says which element of ``x`` each
output element is; the gradient is the sum of ``w`` over each element's copies.
"""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tapegrad as tg
from tapegrad.autograd import functional
from tapegrad.core.registry import check_entries
from harness import MODES, backward

EXAMPLES = int(os.environ.get("TAPEGRAD_VIEW_EXAMPLES", "60"))
PROFILE = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, print_blob=True,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

try:
    import torch
except ImportError:
    torch = None


# -- the ops: name -> (draw parameters for a shape, tapegrad, NumPy, PyTorch) --------------
def _dim(draw, nd):
    return draw(st.integers(-nd, nd - 1))


def _flip(draw, shape):
    nd = len(shape)
    dims = draw(st.permutations(range(nd)))[:draw(st.integers(0, nd))]
    return [d - nd if draw(st.booleans()) else d for d in dims]


def _roll(draw, shape):
    nd = len(shape)
    if nd == 0 or draw(st.booleans()):
        return draw(st.integers(-5, 5)), None
    dims = draw(st.permutations(range(nd)))[:draw(st.integers(1, nd))]
    return tuple(draw(st.integers(-5, 5)) for _ in dims), tuple(dims)


def _narrow(draw, shape):
    nd = len(shape)
    d = _dim(draw, nd)
    n = shape[d]
    start = draw(st.integers(-n, n))
    return d, start, draw(st.integers(0, n - (start + n if start < 0 else start)))


def _np_narrow(a, d, start, length):
    start += a.shape[d] if start < 0 else 0
    return np.take(a, range(start, start + length), axis=d)


def _select(draw, shape):
    d = _dim(draw, len(shape))
    n = shape[d]
    return d, draw(st.integers(-n, n - 1))


def _slice_item(draw, n):
    kind = draw(st.sampled_from(["int", "slice", "full"] if n else ["slice", "full"]))
    if kind == "int":
        return draw(st.integers(-n, n - 1))
    if kind == "full":
        return slice(None)
    bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
    return slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, 3])))


def _basic_index(draw, shape):
    """Ints, slices (positive steps) for some leading dimensions, then maybe ``...`` and
    items for some trailing ones, with ``None`` anywhere."""
    nd = len(shape)
    k = draw(st.integers(0, nd))
    items = [_slice_item(draw, n) for n in shape[:k]]
    if draw(st.booleans()):
        j = draw(st.integers(0, nd - k))
        items += [Ellipsis] + [_slice_item(draw, n) for n in shape[nd - j:]]
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    return tuple(items)


def _advanced_index(draw, shape):
    """One integer array (or a mask over the leading dimensions) among full slices:
    where NumPy and PyTorch place the result's dimensions alike."""
    nd = len(shape)
    at = draw(st.integers(0, nd - 1))
    n = shape[at]
    if draw(st.booleans()) or n == 0:
        k = draw(st.integers(1, nd - at))
        size = int(np.prod(shape[at:at + k]))
        mask = np.array(draw(st.lists(st.booleans(), min_size=size, max_size=size)), bool).reshape(shape[at:at + k])
        return (slice(None),) * at + (mask,)
    idx = np.array(draw(st.lists(st.integers(-n, n - 1), min_size=0, max_size=5)), np.int64)
    if draw(st.booleans()) and idx.size:
        idx = idx.reshape(-1, 1)
    return (slice(None),) * at + (idx,)


def _permute(draw, shape):
    return tuple(draw(st.permutations(range(len(shape)))))


def _transpose(draw, shape):
    nd = max(len(shape), 1)
    return draw(st.integers(-nd, nd - 1)), draw(st.integers(-nd, nd - 1))


def _movedim(draw, shape):
    nd = len(shape)
    k = draw(st.integers(0, nd))
    return tuple(draw(st.permutations(range(nd)))[:k]), tuple(draw(st.permutations(range(nd)))[:k])


def _diagonal(draw, shape):
    nd = len(shape)
    d1 = draw(st.integers(0, nd - 1))
    d2 = draw(st.integers(0, nd - 1).filter(lambda d: d != d1))
    return draw(st.integers(-3, 3)), d1, d2


def _unfold(draw, shape):
    nd = len(shape)
    d = draw(st.integers(0, max(nd, 1) - 1))
    n = shape[d] if nd else 1
    return d, draw(st.integers(0, n)), draw(st.integers(1, 3))


def _expand(draw, shape):
    lead = tuple(draw(st.lists(st.integers(0, 3), max_size=4 - len(shape))))
    return lead + tuple(draw(st.integers(0, 3)) if n == 1 else (n if draw(st.booleans()) else -1) for n in shape)


def _rot90(draw, shape):
    nd = len(shape)
    d1 = draw(st.integers(0, nd - 1))
    d2 = draw(st.integers(0, nd - 1).filter(lambda d: d != d1))
    return draw(st.integers(-5, 5)), (d1, d2)


def _as_strided(draw, shape):
    """Sizes, strides and an offset that stay inside the input's elements (overlaps and
    zero strides included)."""
    n = int(np.prod(shape))
    nd = draw(st.integers(0, 3))
    size = tuple(draw(st.integers(0, 3)) for _ in range(nd))
    stride = tuple(draw(st.integers(0, 3)) for _ in range(nd))
    reach = sum((k - 1) * s for k, s in zip(size, stride)) if all(size) else 0
    if n == 0:              # no element to view: an empty result (a 0-d one would need one)
        size, stride = (0,) * max(nd, 1), (1,) * max(nd, 1)
        reach = 0
    elif reach >= n:
        size, reach = (1,) * nd, 0
    return size, stride, draw(st.integers(0, max(n - 1 - reach, 0)))


def _np_as_strided(a, size, stride, offset):
    flat = a.reshape(-1)
    if not flat.size or not all(size):
        return np.zeros(size, a.dtype)
    return np.lib.stride_tricks.as_strided(flat[offset:], size, [s * flat.itemsize for s in stride])


def _sliding(a, d, size, step):
    """NumPy's spelling of ``Tensor.unfold``."""
    if a.ndim == 0:         # (PyTorch: the one window, of ``size`` 0 or 1 elements)
        return a.reshape(1)[:size]
    w = np.lib.stride_tricks.sliding_window_view(a, size, axis=d)
    return w[(slice(None),) * d + (slice(None, None, step),)]


def _np_expand(a, sizes):
    lead = len(sizes) - a.ndim
    return np.broadcast_to(a, tuple(s if s != -1 else a.shape[i - lead] for i, s in enumerate(sizes)))


def _np_rot90(a, k, dims):
    return np.rot90(a, k, dims)


def _torch_index(t, idx):
    return t[tuple(torch.from_numpy(i) if isinstance(i, np.ndarray) else i for i in idx)]


def _tg_index(x, idx):
    return x[tuple(tg.tensor(i) if isinstance(i, np.ndarray) else i for i in idx)]


OPS = {
    # name: (minimum ndim, draw parameters, tapegrad, NumPy, PyTorch)
    "flip": (0, _flip, lambda x, p: x.flip(p), lambda a, p: np.flip(a, tuple(p)) if p else a,
             lambda t, p: t.flip(p)),
    "roll": (0, _roll, lambda x, p: tg.roll(x, *p), lambda a, p: np.roll(a, p[0], p[1]),
             lambda t, p: torch.roll(t, *p)),
    "narrow": (1, _narrow, lambda x, p: x.narrow(*p), lambda a, p: _np_narrow(a, *p), lambda t, p: t.narrow(*p)),
    "select": (1, _select, lambda x, p: x.select(*p), lambda a, p: np.take(a, p[1], axis=p[0]),
               lambda t, p: t.select(*p)),
    "basic index": (0, _basic_index, lambda x, p: x[p], lambda a, p: a[p], lambda t, p: t[p]),
    "advanced index": (1, _advanced_index, _tg_index, lambda a, p: a[p], _torch_index),
    "permute": (0, _permute, lambda x, p: x.permute(p), lambda a, p: a.transpose(p), lambda t, p: t.permute(p)),
    "transpose": (0, _transpose, lambda x, p: x.transpose(*p),
                  lambda a, p: np.swapaxes(a, *p) if a.ndim else a, lambda t, p: t.transpose(*p)),
    "movedim": (0, _movedim, lambda x, p: tg.movedim(x, *p), lambda a, p: np.moveaxis(a, *p) if p[0] else a,
                lambda t, p: torch.movedim(t, *p)),
    "diagonal": (2, _diagonal, lambda x, p: x.diagonal(*p), lambda a, p: np.diagonal(a, *p),
                 lambda t, p: t.diagonal(*p)),
    "unfold": (0, _unfold, lambda x, p: x.unfold(*p), lambda a, p: _sliding(a, *p), lambda t, p: t.unfold(*p)),
    "expand": (0, _expand, lambda x, p: x.expand(p), _np_expand, lambda t, p: t.expand(p)),
    "rot90": (2, _rot90, lambda x, p: tg.rot90(x, *p), lambda a, p: _np_rot90(a, *p),
              lambda t, p: torch.rot90(t, *p)),
    "t / mT": (0, lambda draw, shape: None, lambda x, p: x.t() if x.ndim <= 2 else x.mT,
               lambda a, p: a.T if a.ndim <= 2 else np.swapaxes(a, -1, -2), lambda t, p: t.t() if t.ndim <= 2 else t.mT),
    "real": (0, lambda draw, shape: None, lambda x, p: x.real, lambda a, p: a, lambda t, p: t.real),
    "as_strided": (0, _as_strided, lambda x, p: x.as_strided(*p), lambda a, p: _np_as_strided(a, *p),
                   lambda t, p: t.as_strided(*p)),
}


@st.composite
def cases(draw, op):
    min_nd = OPS[op][0]
    nd = draw(st.integers(min_nd, 4))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=nd, max_size=nd)))
    if op == "select" or (op in ("rot90", "diagonal") and draw(st.booleans())):
        shape = tuple(max(n, 1) for n in shape)     # (select needs elements; fewer empty cases elsewhere)
    return shape, OPS[op][1](draw, shape)


def _arr(t):
    return np.asarray(t.detach().numpy())


def _check_tape(t):
    """Every entry of the tape that recorded ``t`` indexes inside its arrays."""
    T = t._tape
    if T is not None:       # (None: a result made off the tape, a constant)
        check_entries(T.arrays()[0], T.aux_array())


def _check_case(op, shape, p):
    _, _, f_tg, f_np, f_torch = OPS[op]
    rng = np.random.default_rng(abs(hash((op, shape, repr(p)))) % 2 ** 32)
    a = rng.standard_normal(shape)
    grid = np.arange(a.size, dtype=np.int64).reshape(shape)
    where = np.asarray(f_np(grid, p))        # which element of x each output element is
    want = a.reshape(-1)[where] if where.size else np.zeros(where.shape)
    w = rng.standard_normal(where.shape)
    v = rng.standard_normal(shape)
    want_grad = np.bincount(where.reshape(-1), w.reshape(-1), minlength=a.size).reshape(shape)
    want_tangent = v.reshape(-1)[where] if where.size else np.zeros(where.shape)

    if torch is not None:
        tt = torch.tensor(a, requires_grad=True)
        ty = f_torch(tt, p)
        assert tuple(ty.shape) == where.shape
        np.testing.assert_array_equal(ty.detach().numpy(), want)
        (ty * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(tt.grad.numpy(), want_grad, rtol=1e-13, atol=1e-13)

    for mode in MODES:
        with backward(mode):
            x = tg.tensor(a, requires_grad=True)
            y = f_tg(x, p)
            assert tuple(y.shape) == where.shape
            np.testing.assert_array_equal(_arr(y), want)
            _check_tape(y)
            (y * tg.tensor(w)).sum().backward()
            np.testing.assert_allclose(_arr(x.grad), want_grad, rtol=1e-13, atol=1e-13)

            # create_graph: the gradient is linear in w, and its gradient along v is op(v)
            x = tg.tensor(a, requires_grad=True)
            wt = tg.tensor(w, requires_grad=True)
            g, = tg.autograd.grad((f_tg(x, p) * wt).sum(), x, create_graph=True)
            np.testing.assert_allclose(_arr(g), want_grad, rtol=1e-13, atol=1e-13)
            _check_tape(g)
            if where.size:      # (nothing flows through an empty selection: the gradient is a constant)
                gw, = tg.autograd.grad((g * tg.tensor(v)).sum(), wt)
                np.testing.assert_allclose(_arr(gw), want_tangent, rtol=1e-13, atol=1e-13)

    # forward mode
    _, tangent = functional.jvp(lambda x: f_tg(x, p), tg.tensor(a), tg.tensor(v))
    np.testing.assert_allclose(_arr(tangent), want_tangent, rtol=1e-13, atol=1e-13)

    # replay on new inputs (the recording call, then replays)
    step = tg.compile(lambda x, w: (f_tg(x, p) * w).sum())
    for k in range(3):
        b = a + k
        x = tg.tensor(b, requires_grad=True)
        loss = step(x, tg.tensor(w))
        np.testing.assert_allclose(_arr(loss), (b.reshape(-1)[where] * w).sum() if where.size else 0.0,
                                   rtol=1e-12, atol=1e-12)
        loss.backward()
        np.testing.assert_allclose(_arr(x.grad), want_grad, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("op", sorted(OPS))
def test_view_op(op):
    @PROFILE
    @given(cases(op))
    def run(case):
        _check_case(op, *case)
    run()


def test_zero_dim_flip_every_path():
    """A 0-d flip (once a NumPy scalar taken for a view: the compiled reverse wrote
    the gradient far outside the adjoint) gives its gradient on every path."""
    for mode in MODES:
        with backward(mode):
            x = tg.tensor(0.7, requires_grad=True)
            (x.flip(()) * 3).backward()
            assert x.grad.item() == 3.0
            x = tg.tensor(0.7, requires_grad=True)
            g, = tg.autograd.grad(x.flip(()) * 3, x, create_graph=True)
            assert g.item() == 3.0
            x = tg.tensor(0.7, requires_grad=True)
            g, = tg.autograd.grad((x.flip(()) * x).flip([]), x, create_graph=True)
            assert g.item() == pytest.approx(1.4)
            h, = tg.autograd.grad(g, x)
            assert h.item() == 2.0
    _, t = functional.jvp(lambda x: x.flip(()) * 3, tg.tensor(0.7), tg.tensor(2.0))
    assert t.item() == 6.0
    assert functional.hvp(lambda x: (x.flip(()) ** 3), tg.tensor(0.7), tg.tensor(1.0))[1].item() == pytest.approx(4.2)
    # the compiled Hessian program of the structure (compiled at its first walk, in the caller)
    from tapegrad.autograd import tangent_program as TP
    saved = TP.MODE[0], TP.COMPILE_AFTER
    TP.MODE[0], TP.COMPILE_AFTER = "now", 1
    try:
        runs = TP.RUNS[0]
        for k in range(3):
            hv = functional.hvp(lambda x: (x.flip(()) ** 3), tg.tensor(0.7 + k), tg.tensor(1.0))[1]
            assert hv.item() == pytest.approx(6 * (0.7 + k))
        if os.environ.get("TAPEGRAD_INTERPRET") != "always":       # (the programs are compiled code)
            assert TP.RUNS[0] > runs
    finally:
        TP.MODE[0], TP.COMPILE_AFTER = saved
    fused = tg.compile(lambda x: (x.flip(()) * x.expand(3)).sum(), fuse=True)
    for k in range(3):
        x = tg.tensor(0.7 + k, requires_grad=True)
        fused(x).backward()
        assert x.grad.item() == pytest.approx(6 * (0.7 + k))
    assert fused.fusion()[0]["fused"]
    f = tg.compile(lambda x: x.flip(()) * 3)
    tape = tg.record(lambda x: x.flip(()) * 3, np.array(0.7))
    for k in range(4):
        x = tg.tensor(0.7 + k, requires_grad=True)
        y = f(x)
        assert y.item() == pytest.approx(3 * (0.7 + k))
        y.backward()
        assert x.grad.item() == 3.0
        value, g = tape.value_and_grad(np.array(0.7 + k))
        assert float(value) == pytest.approx(3 * (0.7 + k)) and float(np.asarray(g)) == 3.0


def test_view_of_a_copy_is_refused_where_made():
    """A view function that makes a copy or a NumPy scalar has no descriptor: refused
    when recorded (EntryError), never handed to a kernel, and not cached."""
    from tapegrad.core.registry import EntryError
    from tapegrad.ops import shape as S
    x = tg.randn(2, 3, requires_grad=True)
    with pytest.raises(EntryError, match="copy"):
        S.strided(x, lambda a: a.copy(), "AliasBackward0", ("a copy",))
    assert ((2, 3), ("a copy",)) not in S._VIEWS
    z = tg.tensor(0.5, requires_grad=True)
    with pytest.raises(EntryError, match="NumPy scalar"):
        S.strided(z, lambda a: a[()], "AliasBackward0", ("a scalar",))
    with pytest.raises(EntryError, match="reaches elements"):
        S.check_descriptor(np.array([1, 4, 3, 1]), 0, 6)      # elements 4, 5, 6 of 6
    assert S.check_descriptor(np.array([1, 3, 3, 1]), 0, 6) == 3


def test_select_unfold_and_negative_step_errors_are_pytorchs():
    x = tg.randn(3, 4)
    cases = [(lambda: x.select(0, 3), IndexError, "select(): index 3 out of range for tensor of size [3, 4] at "
                                                  "dimension 0"),
             (lambda: x.select(-2, 5), IndexError, "select(): index 5 out of range for tensor of size [3, 4] at "
                                                   "dimension 0"),
             (lambda: tg.tensor(1.).select(0, 0), IndexError, "select() cannot be applied to a 0-dim tensor."),
             (lambda: x.unfold(1, 5, 1), RuntimeError, "maximum size for tensor at dimension 1 is 4 but size is 5"),
             (lambda: x.unfold(1, 2, 0), RuntimeError, "step is 0 but must be > 0"),
             (lambda: x.unfold(1, -1, 1), RuntimeError, "size is -1 but must be >= 0"),
             (lambda: x[::-1], ValueError, "step must be greater than zero"),
             (lambda: x[:, ::-2], ValueError, "step must be greater than zero"),
             (lambda: x[::0], ValueError, "slice step cannot be zero")]
    for f, err, msg in cases:
        with pytest.raises(err) as e:
            f()
        assert str(e.value) == msg
    assert x.select(1, -1).grad_fn is None
    y = tg.randn(3, 4, requires_grad=True)
    assert type(y.select(1, -1).grad_fn).__name__ == "SelectBackward0"
    assert type(y.unfold(1, 2, 1).grad_fn).__name__ == "UnfoldBackward0"


@pytest.mark.parametrize("shape", [(), (0,), (1,), (3,), (2, 0, 3), (2, 1, 3), (1, 2, 1, 2)])
@pytest.mark.parametrize("part", ["real", "imag", "view_as_real"])
def test_complex_views(shape, part):
    """The real and imaginary parts of a complex tensor, and ``view_as_real``: values and
    the complex gradient of ``sum(w * part(z))`` (``w`` for the real part, ``i w`` for the
    imaginary one, PyTorch's convention), compiled and interpreted, every entry checked."""
    rng = np.random.default_rng(len(shape))
    a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    f = {"real": lambda z: z.real, "imag": lambda z: z.imag, "view_as_real": tg.view_as_real}[part]
    want = {"real": a.real, "imag": a.imag, "view_as_real": np.stack([a.real, a.imag], -1)}[part]
    w = rng.standard_normal(want.shape)
    if part == "view_as_real":
        want_grad = w[..., 0] + 1j * w[..., 1]
    else:
        want_grad = w + 0j if part == "real" else 1j * w
    for mode in MODES:
        with backward(mode):
            z = tg.tensor(a, requires_grad=True)
            y = f(z)
            np.testing.assert_array_equal(_arr(y), want)
            (y * tg.tensor(w)).sum().backward()
            np.testing.assert_allclose(np.asarray(z.grad.numpy()).reshape(shape), want_grad, rtol=1e-14, atol=1e-14)
    if torch is not None:
        zt = torch.tensor(a, requires_grad=True)
        yt = {"real": lambda z: z.real, "imag": lambda z: z.imag, "view_as_real": torch.view_as_real}[part](zt)
        (yt * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(zt.grad.numpy(), want_grad, rtol=1e-14, atol=1e-14)


def test_check_tapes_checks_each_entry_once_before_its_first_backward(monkeypatch):
    """TAPEGRAD_CHECK_TAPES: a tape's entries are checked before the first backward that
    sweeps them, and only the entries added since at the next backward of the same tape
    (a whole-tape check at every backward made long finite-difference checks quadratic)."""
    from tapegrad.autograd import walk
    from tapegrad.core import registry
    starts = []
    real = walk.check_entries
    monkeypatch.setattr(walk, "check_entries", lambda ints, aux, start=0: starts.append((start, len(ints)))
                        or real(ints, aux, start))
    was, registry.CHECK_TAPES[0] = registry.CHECK_TAPES[0], True     # (the list walk reads)
    try:
        x = tg.tensor([0.5, 1.5], requires_grad=True)
        y = (x.sin() * 2).sum()
        for _ in range(3):                      # (gradcheck's way: one backward per output, retained)
            y.backward(retain_graph=True)
        z = (x.exp() * x).sum()                 # (a new tape: the backward rotated the thread's)
        z.backward()
    finally:
        registry.CHECK_TAPES[0] = was
    v = np.array([0.5, 1.5])
    np.testing.assert_allclose(x.grad.numpy(), 3 * 2 * np.cos(v) + np.exp(v) * (1 + v), rtol=1e-14)
    assert [s for s, _ in starts] == [0, 0] and len(starts) == 2, starts
