"""The compiled reverse sweep compiles only the kernel families a tape uses
(``kernels.sweep.run_for``: one variant per combination of families, each cached
on disk), and every variant gives the gradients of the sweep over all families."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.nn.functional as F
from tapegrad.autograd import engine, walk
from tapegrad.kernels import sweep as K
from tapegrad.core.registry import BINARY, BINARY2, LINALG, REDUCE, SHAPE, UNARY, UNARY2


def _run(code, cache_dir):
    env = dict(os.environ, TAPEGRAD_INTERPRET="never", NUMBA_CACHE_DIR=str(cache_dir))
    code = textwrap.dedent(code) + textwrap.dedent(_REPORT)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    return r.stdout.splitlines()


_REPORT = """
    from tapegrad.kernels import sweep as K
    from tapegrad.core.registry import LINALG, REDUCE, SHAPE
    for k in ("unary_reverse", "binary_reverse", "reduce_reverse", "shape_reverse", "linalg_reverse"):
        print(k, len(getattr(K, k).signatures))
    for name, m in (("reduce", 1 << REDUCE), ("shape+linalg", 1 << SHAPE | 1 << LINALG)):
        r = K._VARIANTS.get(m)
        if r is not None:
            print("variant", name, len(r.stats.cache_hits), len(r.stats.cache_misses))
"""


def test_a_tape_compiles_only_its_families_and_a_later_process_loads_them(tmp_path):
    # (tapes of the families quickest to compile: unary and binary kernels take 30 s)
    # first process, empty cache: a tape of a reduction compiles the reduction kernel only
    out = _run("""
        import tapegrad as tg
        x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
        x.sum().backward()
        print(x.grad.tolist())
    """, tmp_path)
    assert out[0] == "[1.0, 1.0, 1.0]"
    assert out[1:7] == ["unary_reverse 0", "binary_reverse 0", "reduce_reverse 1", "shape_reverse 0",
                        "linalg_reverse 0", "variant reduce 0 1"]
    # a later process loads that variant from the cache; a tape of other families gets
    # its own variant (Numba's cache tells the closures apart by their cells' contents)
    out = _run("""
        import tapegrad as tg
        x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
        x.sum().backward()
        print(x.grad.tolist())
        y = tg.tensor([0.5, -1.0], requires_grad=True)
        tg.dot(y, y).backward()
        print(y.grad.tolist())
    """, tmp_path)
    assert out[:2] == ["[1.0, 1.0, 1.0]", "[1.0, -2.0]"]
    assert out[2:9] == ["unary_reverse 0", "binary_reverse 0", "reduce_reverse 0", "shape_reverse 1",
                        "linalg_reverse 1", "variant reduce 1 0", "variant shape+linalg 0 1"]


def test_variants_are_few_and_cover_their_families():
    all_ = sum(1 << f for f in (UNARY, BINARY, REDUCE, SHAPE, LINALG, UNARY2, BINARY2))
    assert K.ALL == all_ and len(K.VARIANTS) == 8
    for m in range(0, all_ + 1, 2):
        assert K.variant(m) in K.VARIANTS and K.variant(m) & m == m
    assert K.variant(0) == 0
    assert K.variant(1 << REDUCE | 1 << LINALG) == 1 << REDUCE | 1 << SHAPE | 1 << LINALG
    elementwise = 1 << UNARY | 1 << BINARY | 1 << UNARY2 | 1 << BINARY2     # (both tables: one group)
    assert K.variant(1 << UNARY) == K.variant(1 << BINARY2) == elementwise
    assert K.variant(1 << UNARY | 1 << BINARY | 1 << REDUCE) == elementwise | 1 << REDUCE
    assert K.run_for(K.ALL) is K.run


def _families(loss, inputs=None):
    T = loss._tape
    ints, _ = T.arrays()
    targets = None if inputs is None else {id(t): t for t in inputs}
    return walk.mark(T, ints, {loss._slot: [np.ones(1)]}, targets, False)[4]


def test_mark_gives_the_families_of_the_entries_it_processes():
    a = tg.tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)
    b = tg.tensor(np.ones((3, 2)), requires_grad=True)
    c = tg.tensor([0.5], requires_grad=True)
    loss = (a @ b).log_softmax(1).sum() + (c.exp() * c).sum()
    assert _families(loss) == 1 << UNARY | 1 << BINARY | 1 << REDUCE | 1 << LINALG
    # with inputs=: only the entries leading to them
    assert _families(loss, [c]) == 1 << UNARY | 1 << BINARY | 1 << REDUCE
    assert _families(loss, [a]) == 1 << BINARY | 1 << REDUCE | 1 << LINALG


CASES = {
    "unary+binary+reduce": (((5,),), lambda y: (tg.sin(y) * y + tg.cos(y)).sum()),
    "linalg+reduce": (((4, 3), (3, 5)), lambda x, w: (x @ w).log_softmax(1).sum()),
    "every family": (((8, 5), (5, 4), (4,)),
                     lambda x, w, b: F.cross_entropy((x @ w + b).relu()[:, 1:].t().reshape(8, 3),
                                                     tg.tensor(np.array([0, 1, 2, 2, 2, 1, 0, 2])))
                     + tg.cat([w, w], 0).tanh().mean()),
}


@pytest.mark.parametrize("name", list(CASES))
def test_every_variant_gives_the_gradients_of_the_full_sweep(name, monkeypatch):
    monkeypatch.setattr(engine, "INTERPRET", ["never"])
    shapes, fn = CASES[name]
    rng = np.random.default_rng(0)
    leaves = [tg.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]

    def grads():
        for t in leaves:
            t.grad = None
        fn(*leaves).backward()
        return [t.grad.numpy().copy() for t in leaves]

    got = grads()
    monkeypatch.setattr(K, "run_for", lambda fams: K.run)      # the sweep over every family
    want = grads()
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
