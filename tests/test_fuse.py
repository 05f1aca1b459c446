"""Fused replay (tapegrad.replay.fuse): fused against unfused against eager."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import tapegrad as tg

RNG = np.random.default_rng(7)

# The fused loops are compiled code: the run with every backward interpreted covers none of it.
pytestmark = pytest.mark.skipif(os.environ.get("TAPEGRAD_INTERPRET") == "always",
                                reason="the fused sweep is compiled code")


def rosen(x):
    head = x[:-1]
    return (100 * (x[1:] - head ** 2) ** 2 + (1 - head) ** 2).sum()


def lj(pos, eye):
    diff = pos[:, None, :] - pos[None, :, :]
    r2 = (diff * diff).sum(-1) + eye
    i6 = r2 ** -3
    return 0.5 * (4 * (i6 * i6 - i6) * (1 - eye)).sum()


def logreg(X, y, w):
    return tg.log1p(tg.exp(-y * (X @ w))).mean() + 0.5e-3 * (w * w).sum()


def lattice(n_side=4):
    g = np.stack(np.meshgrid(*[np.arange(n_side)] * 3, indexing="ij"), -1).reshape(-1, 3) * 1.1
    return g + 0.05 * RNG.standard_normal(g.shape)


def eager_value_and_grad(fn, arrays, wrt):
    ts = [tg.tensor(a, requires_grad=(i in wrt)) for i, a in enumerate(arrays)]
    out = fn(*ts)
    out.backward()
    return out.detach().numpy(), [ts[i].grad.numpy() for i in wrt]


def check_fused(fn, *arrays):
    """Record ``fn`` with fusion, replay it, and check that it fused and that its value
    and gradients are eager's."""
    rt = tg.record(fn, *arrays, fuse=True)
    rt.value_and_grad(*arrays)          # (an unfused replay: the program is fused after it)
    assert rt.fusion["fused"], rt.fusion
    v, g = rt.value_and_grad(*arrays)
    want, gw = eager_value_and_grad(fn, list(arrays), list(range(len(arrays))))
    close(v, want)
    for a, b in zip(g if isinstance(g, tuple) else (g,), gw):
        close(a, b)


def close(a, b, rtol=1e-12):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    scale = max(float(np.max(np.abs(b))) if b.size else 0.0, 1e-300)
    np.testing.assert_allclose(a, b, rtol=0, atol=rtol * scale)


def test_rosen_compile_fuses_and_matches_eager():
    xv = RNG.uniform(-2, 2, 5000)
    f = tg.compile(rosen, fuse=True)
    want, (gwant,) = eager_value_and_grad(rosen, [xv], [0])
    for i in range(4):
        x = tg.tensor(xv, requires_grad=True)
        y = f(x)
        y.backward()
        close(y.detach().numpy(), want)
        close(x.grad.numpy(), gwant)
    info = f.fusion()[0]
    assert info["fused"] is True
    assert info["groups"] == 1 and info["entries"] == 8
    assert info["bytes_saved"] > 5 * 8 * 4999
    assert f.stats.replays == 3


@pytest.mark.parametrize("n", [15, 16, 17, 4095, 4096, 4097, 3 * 4096 + 7, 70001])
def test_full_sums_in_lanes_and_blocks(n):
    """A full sum adds each block of the innermost axis in four interleaved partial
    sums from 16 elements on: every length around the lanes' and blocks' edges is
    eager's, value and gradient, as rows of n (the lanes run per row; enough rows
    that the tape is not one of small arrays)."""
    xv = RNG.uniform(-2, 2, (-(-70000 // n), n))
    check_fused(lambda x: (x.sin() * x + 1.5).sum(), xv)
    check_fused(lambda x: (x * x).mean(), xv + RNG.uniform(-1, 1, (xv.shape[0], 1)))


def test_lj_record_fuses_into_three_loops():
    pos, eye = lattice(), np.eye(64)
    rt = tg.record(lj, pos, eye, fuse=True)
    want, (gwant,) = eager_value_and_grad(lj, [pos, eye], [0])
    for _ in range(3):
        v, g = rt.value_and_grad(pos, eye, argnums=0)
        close(v, want)
        close(g, gwant)
    info = rt.fusion
    assert info["fused"] is True and info["groups"] == 3
    assert "fused into 3 loops" in repr(rt)
    # and against central differences of the tape itself
    h, k = 1e-6, (5, 1)
    p1, p2 = pos.copy(), pos.copy()
    p1[k] += h
    p2[k] -= h
    fd = (rt(p1, eye) - rt(p2, eye)) / (2 * h)
    assert abs(float(fd) - g[k]) <= 1e-6 * max(1.0, abs(g[k]))


def test_not_fusable_says_why_and_stays_exact():
    x = RNG.standard_normal(50)

    def f(x):
        return x.float().exp().sum()
    rt = tg.record(f, x, fuse=True)
    for _ in range(2):
        v, g = rt.value_and_grad(x)
    info = rt.fusion
    assert info["fused"] is False
    assert "float32, not float64" in info["why"], info
    want, (gwant,) = eager_value_and_grad(f, [x], [0])
    close(v, want)
    close(g, gwant)


def test_comparisons_fused():
    """``where``'s condition and masks, computed from the loops' values at each replay."""
    def leaky(x):
        h = x * 3 - 1
        return (tg.where(h > 0, h, 0.1 * h) + (x < 0.5) * x.exp() + tg.where(x.abs() <= 1, x, x * x)).sum()
    for shape in ((50,), (7, 9)):
        check_fused(leaky, RNG.standard_normal(shape))
    x = RNG.standard_normal(40)
    rt = tg.record(leaky, x, fuse=True)
    rt.value_and_grad(x)
    v, g = rt.value_and_grad(-x)            # the masks follow the new values
    want, (gwant,) = eager_value_and_grad(leaky, [-x], [0])
    close(v, want)
    close(g, gwant)


def test_calls_between_groups():
    """Matrix products, max, logsumexp, softmax, gathers run between the fused loops:
    their inputs a loop's values or views (a transpose), their adjoints into the loops'."""
    X = RNG.standard_normal((300, 4))
    y = np.sign(RNG.standard_normal(300))
    w = RNG.standard_normal(4)
    rt = tg.record(logreg, X, y, w, fuse=True)
    want, (gwant,) = eager_value_and_grad(logreg, [X, y, w], [2])
    for _ in range(2):
        v, g = rt.value_and_grad(X, y, w, argnums=2)
        close(v, want)
        close(g, gwant)
    info = rt.fusion
    assert info["fused"] is True and info["calls"] == 1, info

    def mixed(x, a):
        h = (x.t() @ a).tanh()
        sm = tg.softmax(h, 1)
        return h.max() + (h * h).sum() + h.logsumexp(0).sum() + sm[:, 0].sum() + (sm[[0, 2]] * h[1]).sum()
    xv, av = RNG.standard_normal((6, 4)), RNG.standard_normal((6, 5))
    check_fused(mixed, xv, av)
    rt = tg.record(mixed, xv, av, fuse=True)
    rt.value_and_grad(xv, av)
    assert rt.fusion["calls"] >= 5, rt.fusion


def test_fuse_auto_by_default_off_on_request_and_bad_value_refused():
    x = tg.tensor(RNG.uniform(-2, 2, 100), requires_grad=True)
    f, off = tg.compile(rosen), tg.compile(rosen, fuse=False)
    for _ in range(3):
        f(x).backward()
        off(x).backward()
    assert f.fusion()[0]["why"].startswith("its values are small")      # (the arena's, or under AUTO_ELEMENTS)
    assert off.fusion()[0] == {"fused": False, "why": "fusion is off (fuse=False)"}
    # (tg.record checks its tape at once, which lays out the compiled forward of small arrays when the
    # kernels are loaded)
    assert tg.record(rosen, np.ones(3)).fusion["why"] in ("not replayed often enough yet",
                                                          "its values are small: the compiled forward of small "
                                                          "arrays serves it")
    with pytest.raises(ValueError, match="fuse must be False, True or 'auto'"):
        tg.compile(rosen, fuse="yes")
    with pytest.raises(ValueError, match="fuse must be"):
        tg.record(rosen, np.ones(3), fuse=1.5)


UNARY = [
    ("exp", lambda t: t.exp(), (-2, 2)), ("log", lambda t: t.log(), (0.1, 3)),
    ("log1p", lambda t: t.log1p(), (-0.5, 2)), ("sqrt", lambda t: t.sqrt(), (0.1, 3)),
    ("sin", lambda t: t.sin(), (-3, 3)), ("cos", lambda t: t.cos(), (-3, 3)),
    ("tanh", lambda t: t.tanh(), (-2, 2)), ("sigmoid", lambda t: t.sigmoid(), (-3, 3)),
    ("relu", lambda t: t.relu(), (-1, 1)), ("abs", lambda t: t.abs(), (-1, 1)),
    ("neg", lambda t: -t, (-1, 1)), ("clamp", lambda t: t.clamp(-0.3, 0.4), (-1, 1)),
    ("pow_s", lambda t: t ** 3, (-1, 1)), ("rpow_s", lambda t: 2.0 ** t, (-1, 1)),
    ("rdiv_s", lambda t: 1.5 / t, (0.5, 2)), ("atan", lambda t: t.atan(), (-2, 2)),
    ("expm1", lambda t: t.expm1(), (-1, 1)), ("square", lambda t: t.square(), (-1, 1)),
]


def test_unary_ops_fused_match_eager():
    # one tape of every op (one compile): each op on its own domain, all summed
    lo = np.array([d[0] for _, _, d in UNARY], float)
    hi = np.array([d[1] for _, _, d in UNARY], float)
    xv = lo[:, None, None] + (hi - lo)[:, None, None] * RNG.uniform(0, 1, (len(UNARY), 3, 5))

    def fn(x):
        total = 0.0
        for i, (_, op, _) in enumerate(UNARY):
            total = total + (op(x[i]) * (0.5 + 0.1 * i) + x[i]).sum()
        return total
    check_fused(fn, xv)


BINARY = [
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / b), ("pow", lambda a, b: a.abs() ** b), ("maximum", tg.maximum),
    ("minimum", tg.minimum), ("atan2", tg.atan2),
]
SHAPES = [((3, 1, 4), (5, 1)), ((6,), ()), ((), (2, 3))]


@pytest.mark.parametrize("shapes", SHAPES, ids=[str(s) for s in SHAPES])
def test_binary_ops_broadcasting_fused_match_eager(shapes):
    av = RNG.uniform(0.5, 2, shapes[0])
    bv = RNG.uniform(0.5, 2, shapes[1])

    def fn(a, b):
        # every op and its sum over one loop (one group), the scalar total after (another)
        sums = [(op(a, b) * (i + 1.5)).sum() + 0.0 * op(b, a).mean() for i, (_, op) in enumerate(BINARY)]
        total = sums[0]
        for t in sums[1:]:
            total = total + t
        return total
    check_fused(fn, av, bv)


@pytest.mark.parametrize("red", ["sum", "mean"])
def test_reductions_over_axes_fused(red):
    xv = RNG.standard_normal((4, 5, 6))

    def fn(x):
        y = x.sin() * x
        total = getattr(y, red)()
        for i, dims in enumerate([(0,), (1,), (2,), (0, 2), (-1,)]):
            r = getattr(y, red)(dim=dims)
            total = total + (r * r).sum() * (i + 1)
        return total
    check_fused(fn, xv)


def test_views_transposes_and_slices_fused():
    xv = RNG.standard_normal((6, 8))

    def fn(x):
        return (x.t()[1:, ::2] * 0.5).exp().sum() + (x[::2, 1:].t() * x[1:4, :7].t()).sum() + x.reshape(4, 12)[:, 3].sum()
    rt = tg.record(fn, xv, fuse=True)
    rt.value_and_grad(xv)               # (an unfused replay: the program is fused after it)
    assert rt.fusion["fused"], rt.fusion
    v, g = rt.value_and_grad(xv)
    want, (gw,) = eager_value_and_grad(fn, [xv], [0])
    close(v, want)
    close(g, gw)


def test_fused_tape_keeps_backward_semantics():
    xv = RNG.uniform(-2, 2, 300)
    f = tg.compile(rosen, fuse=True)
    x = tg.tensor(xv, requires_grad=True)
    f(x).backward()
    f(x).backward()                  # (fused from here on)
    assert f.fusion()[0]["fused"]
    _, (g1,) = eager_value_and_grad(rosen, [xv], [0])
    x.grad = None
    y = f(x)
    y.backward(retain_graph=True)
    y.backward()                     # accumulates twice
    close(x.grad.numpy(), 2 * g1)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()
    # create_graph and grad(): the unfused values, made on demand
    y = f(x)
    (g,) = tg.autograd.grad(y, x, create_graph=True)
    close(g.detach().numpy(), g1)
    (hv,) = tg.autograd.grad((g * g).sum(), x)
    xt = tg.tensor(xv, requires_grad=True)
    (ge,) = tg.autograd.grad(rosen(xt), xt, create_graph=True)
    (hve,) = tg.autograd.grad((ge * ge).sum(), xt)
    close(hv.numpy(), hve.numpy())
    # a hook on the input sees the fused gradient
    seen = []
    x.grad = None
    h = x.register_hook(lambda g: seen.append(g.numpy().copy()))
    f(x).backward()
    h.remove()
    close(seen[0], g1)
    close(x.grad.numpy(), g1)


def test_auto_fuses_in_the_background(monkeypatch):
    """fuse="auto", tg.compile's default: a large tape compiles in the background
    after a couple of replays and switches over.  (Kept whatever its speed: the suite's
    programs are bounds-checked, and slower so; the decision has a test of its own below.)"""
    from tapegrad.replay import fuse
    monkeypatch.setattr(fuse, "AUTO_KEEP", float("inf"))
    xv = RNG.uniform(-2, 2, 1 << 17)
    f = tg.compile(rosen)
    _, (gw,) = eager_value_and_grad(rosen, [xv], [0])
    deadline = time.time() + 120
    calls = 0
    while True:
        x = tg.tensor(xv, requires_grad=True)
        f(x).backward()
        close(x.grad.numpy(), gw)
        calls += 1
        info = f.fusion()[0]
        if info["fused"] or time.time() > deadline:
            break
        time.sleep(0.05)
    assert info["fused"], info
    assert calls > 2                 # the replays went on unfused while it compiled


def test_empty_operand_fused():
    av, bv = np.zeros((0, 3)), RNG.standard_normal(3)

    def fn(a, b):
        return (a * b).sum() + (b * b).sum()
    rt = tg.record(fn, av, bv, fuse=True)
    rt.value_and_grad(av, bv)           # (an unfused replay: the program is fused after it)
    assert rt.fusion["fused"], rt.fusion
    v, (ga, gb) = rt.value_and_grad(av, bv)
    close(v, (bv * bv).sum())
    assert ga.shape == (0, 3)
    close(gb, 2 * bv)


def test_small_tapes_stay_on_the_compiled_forwards_with_auto():
    f = tg.compile(rosen, fuse="auto")
    x = tg.tensor(RNG.uniform(-2, 2, 50), requires_grad=True)
    for _ in range(4):
        f(x).backward()
    assert f.fusion()[0]["fused"] is False
    assert "small" in f.fusion()[0]["why"]


def test_cache_serves_a_new_process():
    code = ("import numpy as np, tapegrad as tg\n"
            "def f(x):\n    return ((x[1:] - x[:-1] ** 2) ** 2 * 3.25).sum()\n"
            "rt = tg.record(f, np.linspace(0, 1, 1000), fuse=True)\n"
            "v, g = rt.value_and_grad(np.linspace(0, 1, 1000))\n"
            "print(rt.fusion['fused'], rt.fusion['cached'], repr(float(v)))\n")
    out = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
           for _ in range(2)]
    for o in out:
        assert o.returncode == 0, o.stderr
    first, second = (o.stdout.split() for o in out)
    assert first[0] == "True" and second[0] == "True"
    assert second[1] == "True"
    assert first[2] == second[2]


def test_memory_flat_over_many_fused_replays():
    import tracemalloc
    xv = RNG.uniform(-2, 2, 2000)
    f = tg.compile(rosen, fuse=True)

    def step():
        x = tg.tensor(xv, requires_grad=True)
        f(x).backward()
        return x.grad
    for _ in range(20):
        step()
    assert f.fusion()[0]["fused"]
    tracemalloc.start()
    try:
        for i in range(3000):
            step()
            if i == 999:
                base = tracemalloc.get_traced_memory()[0]
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, grown          # (2,000 more replays: no per-replay residue)


def test_auto_keeps_the_unfused_replay_when_it_is_faster(monkeypatch):
    """fuse="auto" times one fused replay against one unfused replay and keeps the faster:
    with the bar at 0 (fused must take no time) it stays unfused, saying why, and exact."""
    from tapegrad.replay import fuse
    monkeypatch.setattr(fuse, "AUTO_KEEP", 0.0)
    xv = RNG.uniform(-2, 2, 1 << 17)
    f = tg.compile(rosen, fuse="auto")
    _, (gw,) = eager_value_and_grad(rosen, [xv], [0])
    deadline = time.time() + 120
    while True:
        x = tg.tensor(xv, requires_grad=True)
        f(x).backward()
        close(x.grad.numpy(), gw)
        info = f.fusion()[0]
        if "compiling" not in info["why"] and "often enough" not in info["why"] or time.time() > deadline:
            break
        time.sleep(0.05)
    assert info["fused"] is False and "slower than the unfused replay" in info["why"], info
    x = tg.tensor(xv, requires_grad=True)
    f(x).backward()
    close(x.grad.numpy(), gw)


def test_profile_shows_the_fused_loops():
    xv = RNG.uniform(-2, 2, 3000)
    f = tg.compile(rosen, fuse=True)
    f(tg.tensor(xv, requires_grad=True)).backward()         # recorded
    f(tg.tensor(xv, requires_grad=True)).backward()         # fused (and checked)
    assert f.fusion()[0]["fused"]
    with tg.profile() as p:
        for _ in range(3):
            x = tg.tensor(xv, requires_grad=True)
            f(x).backward()
    assert p.fused_runs == 6                    # a forward and a reverse per replay
    assert 0 < p.fused_s <= p.wall_s
    assert p.backwards == 3 and p.sweeps == 0   # (the fused reverse, not the compiled sweep)
    assert "fused replays:" in p.report() and "6 runs" in p.report()
    _, (gw,) = eager_value_and_grad(rosen, [xv], [0])
    close(x.grad.numpy(), gw)
    with tg.profile() as q:
        tg.tensor(xv, requires_grad=True).sum().backward()
    assert q.fused_runs == 0 and "fused replays" not in q.report()


def test_infinite_constants_fused():
    """One-sided clamps carry an infinite bound (generated as np.inf, not a bare name)."""
    def clamps(x):
        return (x.clamp(min=0.0) * 2).sum() + (x.clamp(max=0.5) ** 2).sum() + x.clamp(-1, 1).sum()
    check_fused(clamps, RNG.standard_normal(60))


@pytest.mark.parametrize("p", [5, -7, 8, 2.5, -3, 4])
def test_integer_powers_fused(p):
    """``x ** p`` in the loops: the kernels' closed forms, repeated squaring for
    other integral p, libm's pow otherwise; value and gradient are eager's."""
    xv = RNG.uniform(0.5, 1.5, 70000)
    check_fused(lambda x: (x ** p).sum(), xv)


def _stencil(x, c):
    return ((x[:, 1:] - x[:, :-1]) ** 2 * c).sum() + (x.sin() * c).sum()


def _bias(x, b):
    return ((x + b) ** 2).sum() + (x * b).sin().sum()


@pytest.mark.parametrize("fn, shapes, kinds", [
    (rosen, [(5000,)], {"carry"}),                      # x[i] and x[i + 1]
    (_stencil, [(300, 250), (300, 1)], {"carry", "hoist", "row"}),
    (_bias, [(300, 250), (300, 1)], {"hoist", "row"}),  # one element per row
    (_bias, [(300, 250), (250,)], {"row"}),
    (lambda x: (x[::2] * x[1::2]).sum(), [(6000,)], set()),   # two offsets, not one step apart
    (lambda x: (x[:-2] * x[1:-1].exp() * x[2:].sin()).sum(), [(5000,)], {"carry"}),    # x[i .. i + 2]
    (lambda x: (x[:-3] * x[3:].cos()).sum(), [(5000,)], {"carry"}),    # x[i], x[i + 3]: nothing at i + 1, i + 2
    (lambda x: (x[:-6] * x[6:].cos()).sum(), [(5000,)], set()),        # further apart than MAX_CARRY steps
    # two loops adding into one gradient: the second adds to what the first wrote
    (lambda x: (x.sin() * x.cos()).sum() + (x[:-1] * x[1:].exp()).sum(), [(5000,)], {"carry", "row"}),
    (lambda x: (x[:-1] * x[1:].exp()).sum() + (x.sin() * x.cos()).sum(), [(5000,)], {"carry", "row"}),
])
def test_adjoint_accumulators_change_no_bit(monkeypatch, fn, shapes, kinds):
    """The reverse loops add into locals (``_accumulators``) instead of one ``+=`` on
    the gradient array per contribution: the same additions in the same order, so
    every gradient is bitwise that of the loops without them, and eager's to 1e-12."""
    from tapegrad.replay import fuse
    arrays = [RNG.uniform(0.5, 2, s) for s in shapes]
    seen = set()
    plain = fuse.FusedProgram._accumulators

    def spy(self, g):
        acc = plain(self, g)
        seen.update(kind for kind, _, _ in acc.values())
        return acc
    monkeypatch.setattr(fuse.FusedProgram, "_accumulators", spy)
    rt = tg.record(fn, *arrays, fuse=True)
    rt.value_and_grad(*arrays)          # (an unfused replay: the program is fused after it)
    assert rt.fusion["fused"] and seen == kinds, (rt.fusion, seen)
    v1, g1 = rt.value_and_grad(*arrays)
    monkeypatch.setattr(fuse.FusedProgram, "_accumulators", lambda self, g: {})
    rt = tg.record(fn, *arrays, fuse=True)
    rt.value_and_grad(*arrays)
    assert rt.fusion["fused"]
    v2, g2 = rt.value_and_grad(*arrays)
    g1, g2 = (g1, g2) if isinstance(g1, tuple) else ((g1,), (g2,))
    assert v1 == v2 and all(np.array_equal(a, b) for a, b in zip(g1, g2))
    want, gw = eager_value_and_grad(fn, arrays, list(range(len(arrays))))
    for a, b in zip(g1, gw):
        close(a, b)


def test_a_fused_replay_that_differs_is_refused_with_one_warning(monkeypatch):
    """The first fused replay is checked against the unfused one: a difference (here a
    loop made wrong on purpose) keeps the tape unfused, with one warning naming the
    function, and every replay exact."""
    from tapegrad.replay import fuse
    real = fuse.FusedProgram.forward

    def off_by_a_little(self, arrays):
        vals = real(self, arrays)
        for s in self.groups[-1].outs:
            vals[s] = vals[s] * (1 + 1e-9)
        return vals
    monkeypatch.setattr(fuse.FusedProgram, "forward", off_by_a_little)
    xv = RNG.uniform(-2, 2, 300)

    def my_rosen(x):
        return rosen(x)
    f = tg.compile(my_rosen, fuse=True)
    _, (gw,) = eager_value_and_grad(rosen, [xv], [0])
    with pytest.warns(RuntimeWarning, match="fused replay of .*my_rosen.* differs from the unfused one") as got:
        for _ in range(4):
            x = tg.tensor(xv, requires_grad=True)
            y = f(x)
            y.backward()
            close(y.item(), rosen(tg.tensor(xv)).item())
            close(x.grad.numpy(), gw)
    assert len([w for w in got if "differs from the unfused" in str(w.message)]) == 1
    info = f.fusion()[0]
    assert info["fused"] is False and "differs from the unfused one" in info["why"], info


def test_guards_still_fall_back_on_a_fused_tape():
    """A Python branch on a value is guarded as without fusion: inputs that take the other
    branch run eagerly (exact), the fused tape serves the inputs that take its branch."""
    def f(x):
        if (x.sum() > 0).item():
            return (x * x).sum()
        return x.sin().sum()
    c = tg.compile(f, fuse=True)
    xp = RNG.uniform(0.1, 1.0, 200)
    for _ in range(3):
        x = tg.tensor(xp, requires_grad=True)
        c(x).backward()
    assert c.fusion()[0]["fused"], c.fusion()
    close(x.grad.numpy(), 2 * xp)
    xn = -xp
    x = tg.tensor(xn, requires_grad=True)
    y = c(x)
    y.backward()
    close(y.item(), np.sin(xn).sum())
    close(x.grad.numpy(), np.cos(xn))
    x = tg.tensor(2 * xp, requires_grad=True)           # back on the fused branch
    y = c(x)
    y.backward()
    close(y.item(), (4 * xp * xp).sum())
    close(x.grad.numpy(), 4 * xp)
    assert c.fusion()[0]["fused"]
