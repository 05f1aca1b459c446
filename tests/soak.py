"""A soak run: thousands of small mixed programs in one process (every op family:
elementwise, reductions, views, gathers, setitem, cat, matmul, host ops), each
differentiated by the compiled backward, by the interpreted one (they must agree),
twice with ``create_graph``, and replayed by ``tg.compile`` (unfused: the fused and
tangent programs compile per structure, tests/test_fuse.py and test_tangent_program.py
run them); then the 0-d flip's gradient in a long loop.  It looks for memory a kernel writes outside its arrays:
run under a heap checker (tests/test_soak.py: glibc's ``MALLOC_CHECK_=3``) and in a
plain process, which must exit 0.

    python tests/soak.py [PROGRAMS] [FLIPS]
"""
import sys

import numpy as np

import tapegrad as tg
from tapegrad.autograd import engine
from tapegrad.core.registry import check_entries

rng = np.random.default_rng(20261207)


def shape(nd=None, lo=0, hi=4):
    nd = rng.integers(0, 4) if nd is None else nd
    return tuple(int(n) for n in rng.integers(lo, hi + 1, nd))


def dim(nd):
    return int(rng.integers(-nd, nd)) if nd else 0


# Each builder draws shapes and parameters and returns (f, inputs): f maps tensors to
# a tensor (summed into the loss), inputs are float64 arrays.
def elementwise():
    s = shape()
    b = tuple(n if rng.random() < 0.5 else 1 for n in s)[int(rng.integers(0, len(s) + 1)):]
    return (lambda x, y: (x.sin() * y + (x * 0.5).exp() / (1.5 + y.tanh()) - (x - y).abs().clamp(0.1, 2.0) ** 1.5
                          + tg.where(x > y, x * y, x.sigmoid())), [rng.standard_normal(s), rng.standard_normal(b)])


def reductions():
    s = shape(nd=int(rng.integers(1, 4)), lo=1)
    nd = len(s)
    d = dim(nd)
    ops = [lambda x: x.sum(d, keepdim=True), lambda x: x.mean(), lambda x: x.prod(d),
           lambda x: x.var(d) if x.shape[d] > 1 else x.sum(), lambda x: x.amax(d), lambda x: x.logsumexp(d),
           lambda x: x.softmax(d) * x, lambda x: x.log_softmax(d), lambda x: x.cumsum(d), lambda x: x.cumprod(d),
           lambda x: x.logcumsumexp(d), lambda x: x.std(), lambda x: x.max()]
    f = ops[int(rng.integers(len(ops)))]
    return (lambda x: f(x * 1.0)), [rng.standard_normal(s)]


def views():
    s = shape(lo=1)
    nd = len(s)
    perm = tuple(int(p) for p in rng.permutation(nd))
    ops = [lambda x: x.flip(tuple(range(nd))), lambda x: x.flip(()) * 2, lambda x: x.permute(perm),
           lambda x: x.transpose(0, -1) if nd else x, lambda x: x.expand((2,) + s),
           lambda x: x.diagonal(0, 0, 1) if nd >= 2 else x, lambda x: x.unfold(0, 1, 2) if nd else x.unfold(0, 1, 1),
           lambda x: x.select(0, -1) if nd else x, lambda x: x.narrow(0, 0, 1) if nd else x,
           lambda x: x[..., ::2] if nd else x[...], lambda x: x[None, ..., None], lambda x: x.roll(1, 0) if nd else x,
           lambda x: x.reshape(-1)[1:], lambda x: x.rot90(1, (0, 1)) if nd >= 2 else x,
           lambda x: tg.movedim(x, 0, -1) if nd else x, lambda x: x.unbind(0)[0] if nd else x]
    f = ops[int(rng.integers(len(ops)))]
    g = ops[int(rng.integers(len(ops)))]
    return (lambda x: f(x).sin() + g(x).sum()), [rng.standard_normal(s)]


def zero_d():
    return (lambda x: (x.flip(()) * x).flip([]) + x[()] * 2 + x[...] + x.reshape(1)[0]), [np.array(rng.standard_normal())]


def gathers():
    s = shape(nd=int(rng.integers(1, 4)), lo=1)
    n = s[0]
    idx = rng.integers(-n, n, int(rng.integers(0, 6)))
    mask = rng.random(s) < 0.5
    rows, spots = rng.integers(0, n, s), rng.integers(0, n, n)       # (drawn once: f is called several times)
    ops = [lambda x: x[tg.tensor(idx)], lambda x: x[tg.tensor(mask)], lambda x: x.index_select(0, tg.tensor(idx % n)),
           lambda x: x.gather(0, tg.tensor(rows)), lambda x: x.take(tg.tensor(idx % n)),
           lambda x: x.masked_fill(tg.tensor(mask), 0.5), lambda x: x.repeat(2, *([1] * (len(s) - 1))),
           lambda x: tg.zeros(n).scatter_add(0, tg.tensor(spots), x.reshape(n, -1)[:, 0])]
    f = ops[int(rng.integers(len(ops)))]
    return (lambda x: f(x) * 1.5), [rng.standard_normal(s)]


def setitem():
    s = shape(nd=int(rng.integers(1, 4)), lo=1)

    def f(x, v):
        y = x.clone()
        y[0] = v.sum()
        y[..., -1:] = y[..., :1] * 2
        return y
    return f, [rng.standard_normal(s), rng.standard_normal(s[1:])]


def joins():
    s = shape(nd=int(rng.integers(1, 4)))
    return (lambda x, y: tg.cat([x, y * 2, x.sin()], dim=-1).sum() + tg.stack([x, y]).prod()), \
        [rng.standard_normal(s), rng.standard_normal(s)]


def matmul():
    n, k, m = (int(v) for v in rng.integers(0, 4, 3))
    batch = shape(nd=int(rng.integers(0, 3)), lo=1, hi=3)
    return (lambda a, b: (a @ b).tanh()), [rng.standard_normal(batch + (n, k)), rng.standard_normal((k, m))]


def linalg():
    n = int(rng.integers(1, 4))
    a = rng.standard_normal((n, n)) + 3 * np.eye(n)
    ops = [lambda x: tg.linalg.solve(x, x.sum(-1)), lambda x: tg.linalg.inv(x), lambda x: tg.linalg.det(x),
           lambda x: tg.linalg.cholesky(x @ x.mT), lambda x: tg.linalg.qr(x)[1].abs(),
           lambda x: tg.linalg.eigh(x + x.mT)[0], lambda x: tg.linalg.vector_norm(x, dim=-1)]
    f = ops[int(rng.integers(len(ops)))]
    return f, [a]


BUILDERS = [elementwise, reductions, views, zero_d, gathers, setitem, joins, matmul, linalg]


def grads(f, arrays, mode):
    engine.INTERPRET[0] = mode
    xs = [tg.tensor(a, requires_grad=True) for a in arrays]
    y = f(*xs)
    T = y._tape
    if T is not None:
        check_entries(T.arrays()[0], T.aux_array())
    y.sum().backward()
    return [x.grad.numpy() if x.grad is not None else np.zeros(x.shape) for x in xs]


def one(builder):
    f, arrays = builder()
    compiled = grads(f, arrays, "never")
    interpreted = grads(f, arrays, "always")
    for c, i in zip(compiled, interpreted):
        np.testing.assert_allclose(c, i, rtol=1e-9, atol=1e-9, err_msg=builder.__name__)
    engine.INTERPRET[0] = "never"
    # create_graph twice: the gradient, then the gradient of its sum of squares
    xs = [tg.tensor(a, requires_grad=True) for a in arrays]
    gs = tg.autograd.grad(f(*xs).sum(), xs, create_graph=True, allow_unused=True)
    for g, c in zip(gs, compiled):
        np.testing.assert_allclose(g.detach().numpy() if g is not None else 0.0, c, rtol=1e-9, atol=1e-9)
    used = [g for g in gs if g is not None and g.requires_grad]
    if used:
        tg.autograd.grad(sum((g * g).sum() for g in used), xs, allow_unused=True)
    # replay on new inputs
    step = tg.compile(lambda *xs: f(*xs).sum(), fuse=False)
    for k in range(3):
        xs = [tg.tensor(a + 0.01 * k, requires_grad=True) for a in arrays]
        step(*xs).backward()


def main(programs=3000, flips=100_000):
    # Per-structure Numba programs (fused replays, tangent programs) compile in about a
    # second each: thousands of structures would soak the compiler, not the kernels.
    from tapegrad.autograd import tangent_program
    tangent_program.MODE[0] = "off"
    counts = {}
    for _ in range(programs):
        b = BUILDERS[int(rng.integers(len(BUILDERS)))]
        one(b)
        counts[b.__name__] = counts.get(b.__name__, 0) + 1
    engine.INTERPRET[0] = "never"
    for _ in range(flips):
        x = tg.tensor(0.7, requires_grad=True)
        (x.flip(()) * 3).backward()
        if x.grad.item() != 3.0:
            raise AssertionError("0-d flip: gradient %r" % x.grad.item())
    print("soak: %d programs (%s), %d 0-d flips: all gradients agree"
          % (programs, ", ".join("%s %d" % kv for kv in sorted(counts.items())), flips))


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
