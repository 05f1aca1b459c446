"""Random index expressions against PyTorch: reading, ``__setitem__`` and in-place
updates through the index, their values, gradients and errors.

Each example draws a tensor of 0 to 4 dimensions and an index made of integers
(negative and out of range too), NumPy integers, slices with steps, ``None``,
``...``, Python bools, 0-d integer and bool tensors, integer tensors (int64 and
int32), NumPy arrays, Python lists (nested, empty) and tuples inside the index,
and bool masks (Python lists and tensors, mis-shaped sometimes), in any arrangement;
the index is passed as a tuple, a list or a single item.  Whatever PyTorch does,
tapegrad must do: the same value and gradients, or the same exception type and
message.  Bounded and derandomized (CI); ``TAPEGRAD_FUZZ=long`` runs
``TAPEGRAD_FUZZ_EXAMPLES`` (default 3000) randomized examples.
"""
import os
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import tapegrad as tg  # noqa: E402

LONG = os.environ.get("TAPEGRAD_FUZZ", "").lower() == "long"
SETTINGS = settings(max_examples=int(os.environ.get("TAPEGRAD_FUZZ_EXAMPLES", "3000")) if LONG else 500,
                    derandomize=not LONG, deadline=None, database=None, print_blob=LONG,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# kind of index item -> how many dimensions of the tensor it names
ITEM_DIMS = {"int": 1, "npint": 1, "int0d": 1, "slice": 1, "none": 0, "ellipsis": 0, "bool": 0, "bool0d": 0,
             "list": 1, "nested": 1, "tuple": 1, "tensor": 1, "tensor32": 1, "ndarray": 1,
             "mask": None, "boollist": 1}
KINDS = sorted(ITEM_DIMS) + ["int", "int", "int", "slice", "slice", "list", "tensor", "tensor", "mask"]     # (weights)


class T:
    """An index tensor, made for each library from the same array."""

    def __init__(self, array):
        self.array = array

    def make(self, lib):
        return lib.tensor(self.array)

    def __repr__(self):
        return "tensor(%r)" % self.array.tolist()


def _build(item, lib):
    if isinstance(item, T):
        return item.make(lib)
    if isinstance(item, list):
        return [_build(k, lib) for k in item]
    if isinstance(item, tuple):
        return tuple(_build(k, lib) for k in item)
    if isinstance(item, np.ndarray):
        return item.copy()
    return item


@st.composite
def index_cases(draw):
    nd = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 4, 2, 3, 2, 3, 0]), min_size=nd, max_size=nd)))
    # the items' kinds; naming more dimensions than there are only now and then
    over = draw(st.integers(0, 7)) == 0
    kinds, mask_dims, used = [], [], 0
    for _ in range(draw(st.integers(0, nd + 2))):
        kind = draw(st.sampled_from(KINDS))
        md = draw(st.integers(1, 2)) if kind == "mask" else None
        if used + (md or ITEM_DIMS[kind]) > nd and not over:
            kind, md = draw(st.sampled_from(["none", "bool", "bool0d", "ellipsis"])), None
        if kind == "ellipsis" and "ellipsis" in kinds:      # (PyTorch takes several; their meaning is its own)
            continue
        kinds.append(kind)
        mask_dims.append(md)
        used += md or ITEM_DIMS[kind]
    items = []
    src = 0
    # index arrays mostly of one shape, so that they broadcast
    common = draw(st.sampled_from([(1,), (2,), (3,), (2, 1), (1, 3), (0,), (2, 2)]))
    n_common = int(np.prod(common))

    def size():
        return shape[src] if src < nd else 3

    def one_int():
        """In range mostly; one past either end now and then."""
        n = size()
        if n == 0 or draw(st.integers(0, 11)) == 0:
            return draw(st.sampled_from([n, -n - 1]))
        return draw(st.integers(-n, n - 1))

    def ints(n):
        return [one_int() for _ in range(n)]

    for kind, md in zip(kinds, mask_dims):
        if kind in ("int", "npint", "int0d"):
            k = one_int()
            items.append(k if kind == "int" else np.int64(k) if kind == "npint" else T(np.array(k)))
        elif kind == "slice":
            bound = st.one_of(st.none(), st.integers(-5, 5))
            step = draw(st.sampled_from([None, None, None, 1, 2, 2, 3] * 3 + [0, -1]))
            items.append(slice(draw(bound), draw(bound), step))
        elif kind == "none":
            items.append(None)
        elif kind == "ellipsis":
            items.append(Ellipsis)
            src += max(0, nd - used)
            continue
        elif kind == "bool":
            items.append(draw(st.booleans()))
        elif kind == "bool0d":
            items.append(T(np.array(draw(st.booleans()))))
        elif kind == "list":
            items.append(ints(n_common if draw(st.integers(0, 3)) else draw(st.integers(0, 4))))
        elif kind == "nested":
            n = draw(st.integers(1, 3))
            items.append([ints(n) for _ in range(draw(st.integers(1, 2)))])
        elif kind == "tuple":
            items.append(tuple(ints(n_common if draw(st.integers(0, 3)) else draw(st.integers(1, 3)))))
        elif kind in ("tensor", "tensor32", "ndarray"):
            sh = common if draw(st.integers(0, 3)) else draw(st.sampled_from([(1,), (2,), (3,), (2, 1), (1, 3), (0,)]))
            a = np.array(ints(int(np.prod(sh))), np.int64).reshape(sh)
            if kind == "tensor32":
                a = a.astype(np.int32)
            items.append(a if kind == "ndarray" else T(a))
        elif kind == "boollist":
            n = size() if draw(st.integers(0, 11)) else size() + 1
            items.append(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
        else:   # a bool mask over the next md dimensions, mis-shaped sometimes
            sh = [shape[src + j] if src + j < nd else 2 for j in range(md)]
            if not draw(st.integers(0, 11)):
                sh[-1] += 1
            items.append(T(np.array(draw(st.lists(st.booleans(), min_size=int(np.prod(sh)),
                                                  max_size=int(np.prod(sh)))), bool).reshape(sh)))
            src += md
            continue
        src += ITEM_DIMS[kind]
    form = draw(st.sampled_from(["tuple", "list", "single"] if len(items) == 1 else ["tuple", "tuple", "list"]))
    return shape, items, form


def make_index(case, lib):
    _, items, form = case
    built = [_build(k, lib) for k in items]
    if form == "single":
        return built[0]
    return list(built) if form == "list" else tuple(built)


def _np(t):
    return np.array(t.detach().numpy())


def _weights(shape):
    """A fixed, uneven cotangent for an output of ``shape``."""
    n = int(np.prod(shape, dtype=np.int64))
    return (np.arange(n, dtype=np.float64) % 7 + 1.0).reshape(shape) / 4.0


def _outcome(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args), None
        except Exception as e:  # noqa: BLE001  (the exception is what is compared)
            return None, e


def _same(what, got_torch, got_tg, compare_first=True):
    """Both raised the same exception, or both gave the same arrays (None: no gradient)."""
    (tv, te), (gv, ge) = got_torch, got_tg
    if te is not None:
        assert ge is not None, "%s: torch raised %s: %s; tapegrad gave %r" % (what, type(te).__name__, te, gv)
        assert type(ge) is type(te), "%s: torch raised %s: %s; tapegrad raised %s: %s" % (
            what, type(te).__name__, te, type(ge).__name__, ge)
        assert str(ge) == str(te), "%s: messages differ:\n torch:    %s\n tapegrad: %s" % (what, te, ge)
        return False
    assert ge is None, "%s: tapegrad raised %s: %s; torch gave %r" % (what, type(ge).__name__, ge, tv)
    for i, (a, b) in enumerate(zip(tv, gv)):
        if i == 0 and not compare_first:
            continue
        if a is None or b is None:
            assert a is None and b is None, "%s: output %d: torch %r, tapegrad %r" % (what, i, a, b)
            continue
        assert a.shape == b.shape, "%s: output %d: shape %s (torch) vs %s" % (what, i, a.shape, b.shape)
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12, err_msg="%s: output %d" % (what, i))
    return True


def _leaf(lib, shape):
    a = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.float64).reshape(shape) * 0.5 + 1.0
    return lib.tensor(a, requires_grad=True)


def _grad(t):
    return None if t.grad is None else _np(t.grad)


def read(lib, case):
    x = _leaf(lib, case[0])
    y = x[make_index(case, lib)]
    (y * lib.tensor(_weights(tuple(y.shape)))).sum().backward()
    return _np(y), _grad(x)


def set_scalar(lib, case):
    x = _leaf(lib, case[0])
    y = x.clone()
    y[make_index(case, lib)] = 2.5
    (y * lib.tensor(_weights(tuple(y.shape)))).sum().backward()
    return _np(y), _grad(x)


def set_tensor(lib, case, vshape):
    x = _leaf(lib, case[0])
    v = lib.tensor(-_weights(vshape) - 0.25, requires_grad=True)
    y = x.clone()
    y[make_index(case, lib)] = v
    (y * lib.tensor(_weights(tuple(y.shape)))).sum().backward()
    return _np(y), _grad(x), _grad(v)


def add_inplace(lib, case, vshape):
    x = _leaf(lib, case[0])
    v = lib.tensor(_weights(vshape), requires_grad=True)
    y = x.clone()
    y[make_index(case, lib)] += v
    (y * lib.tensor(_weights(tuple(y.shape)))).sum().backward()
    return _np(y), _grad(x), _grad(v)


def mul_inplace(lib, case):
    x = _leaf(lib, case[0])
    y = x.clone()
    y[make_index(case, lib)] *= 2
    (y * lib.tensor(_weights(tuple(y.shape)))).sum().backward()
    return _np(y), _grad(x)


def _value_shape(draw, target):
    """A shape that broadcasts to ``target`` (leading dims dropped, some made 1, a
    leading 1 added), or now and then one that does not."""
    sh = list(target[draw(st.integers(0, len(target))):])
    sh = [1 if draw(st.integers(0, 3)) == 0 else n for n in sh]
    if draw(st.integers(0, 5)) == 0:
        sh = [1] + sh
    if sh and draw(st.integers(0, 7)) == 0:
        sh[-1] += 1
    return tuple(sh)


@SETTINGS
@given(index_cases(), st.data())
def test_index_matches_torch(case, data):
    what = "shape %s, index %r (%s)" % case
    _same("read " + what, _outcome(read, torch, case), _outcome(read, tg, case))
    probe, err = _outcome(lambda: torch.arange(int(np.prod(case[0], dtype=np.int64))).reshape(case[0])[
        make_index(case, torch)])
    target = tuple(probe.shape) if err is None else (2,)
    # a position written twice: which write lands is the kernel's order, so only the gradients count
    once = err is None and probe.numel() == probe.unique().numel()
    _same("setitem scalar " + what, _outcome(set_scalar, torch, case), _outcome(set_scalar, tg, case))
    vshape = _value_shape(data.draw, target)
    what += ", value shape %s" % (vshape,)
    _same("setitem tensor " + what, _outcome(set_tensor, torch, case, vshape),
          _outcome(set_tensor, tg, case, vshape), compare_first=once)
    _same("+= " + what, _outcome(add_inplace, torch, case, vshape), _outcome(add_inplace, tg, case, vshape),
          compare_first=once)
    _same("*= 2 " + what, _outcome(mul_inplace, torch, case), _outcome(mul_inplace, tg, case))
