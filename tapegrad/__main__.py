"""A short tour of tapegrad:  ``python -m tapegrad``  (or ``python -m tapegrad warmup``).

The tour prints PyTorch's seed examples as tapegrad computes them, then runs a
small gradient descent with timings and, when scikit-learn is installed, a few
epochs of an MLP on its 8x8 digits.  ``warmup`` runs one backward through each op
family so that Numba's on-disk cache is filled before real work starts.
"""
import sys
from time import perf_counter

import numpy as np

import tapegrad as tg
from tapegrad import _jit
from tapegrad.kernels import sweep
from tapegrad.ops.registry import FAMILY_NAMES


def seed_examples():
    print("== Seed examples (PyTorch autograd semantics) ==")
    w = tg.tensor([[1., 2.]], requires_grad=True)
    loss = tg.mm(w, tg.tensor([[1.], [1.]]))
    t = perf_counter()
    loss.backward()                                  # one element: no gradient needed
    first_backward = perf_counter() - t
    print(f"mm(w, [[1.],[1.]]) = {loss}; backward() -> w.grad = {w.grad}")

    w = tg.tensor([[1., 2.]], requires_grad=True)
    x = tg.tensor([[1., 1.], [2., 2.]])
    loss = tg.mm(w, x)
    print(f"loss = mm(w, x) = {loss}")
    try:
        loss.backward()
    except RuntimeError as e:
        print(f"loss.backward() -> RuntimeError: {e}  (w.grad = {w.grad})")
    # The four calls in sequence, all retained; each accumulates into w.grad.
    steps = [("loss.backward(tg.ones_like(loss))", lambda: loss.backward(tg.ones_like(loss), retain_graph=True)),
             ("loss.sum().backward()", lambda: loss.sum().backward(retain_graph=True)),
             ("loss[0][0].backward()", lambda: loss[0][0].backward(retain_graph=True)),
             ("loss[0][1].backward()", lambda: loss[0][1].backward(retain_graph=True))]
    print(f"loss[0][0] = {loss[0][0]!r}")
    for text, step in steps:
        step()
        print(f"{text + ', retain_graph=True':<52} -> w.grad = {w.grad}")
    return first_backward


def rosenbrock(xy):
    x, y = xy[0], xy[1]
    return (1 - x) ** 2 + 100 * (y - x ** 2) ** 2


def optimize(first_backward, iters=2000, lr=1e-3):
    print("\n== Gradient descent on the 2-D Rosenbrock function (plain tensors) ==")
    p = tg.tensor([-1.5, 2.0], requires_grad=True)
    first = None
    loaded_at = None
    t0 = perf_counter()
    for i in range(iters):
        t = perf_counter()
        was_loaded = _jit.loaded()
        loss = rosenbrock(p)
        loss.backward()
        if not was_loaded and _jit.loaded():
            loaded_at = (i, perf_counter() - t)
        if i == 0:
            first = perf_counter() - t
            loss0 = loss.item()
        with tg.no_grad():
            p -= lr * p.grad
        p.grad = None
    total = perf_counter() - t0
    final = rosenbrock(p).item()
    print(f"start (-1.5, 2.0), lr={lr}, {iters} iterations")
    print(f"loss before: {loss0:.6g}")
    print(f"loss after:  {final:.6g}   at ({p[0].item():.4f}, {p[1].item():.4f}); minimum 0 at (1, 1)")
    print(f"first backward of this process (seed examples): {first_backward * 1e3:.1f} ms"
          " (interpreted in NumPy: the compiled sweep is not loaded yet)")
    if loaded_at is not None:
        i, dt = loaded_at
        print(f"iteration {i} loaded the compiled sweep, once interpreting had cost about as much: {dt:.2f} s "
              "(imports Numba; compiles the kernels on an empty cache, else loads them from it)")
        total -= dt
    print(f"first iteration: {first * 1e3:.3f} ms; per iteration afterwards"
          f"{' (without the load)' if loaded_at else ''}: {(total - first) / (iters - 1) * 1e3:.3f} ms")


def replay_demo(iters=2000, lr=1e-3):
    """The same descent with the loss recorded once and replayed (tg.compile)."""
    print("\n== The same descent, recorded once and replayed (tg.compile) ==")
    t = perf_counter()
    _jit.load()         # (replays are for loops that run long: the compiled kernels from the start)
    load = perf_counter() - t
    p = tg.tensor([-1.5, 2.0], requires_grad=True)
    step = tg.compile(rosenbrock)
    t = perf_counter()
    step(p).backward()
    first = perf_counter() - t
    with tg.no_grad():
        p -= lr * p.grad
    p.grad = None
    replay_first = None
    t0 = perf_counter()
    for i in range(iters - 1):
        step(p).backward()
        with tg.no_grad():
            p -= lr * p.grad
        p.grad = None
        if i == 0:      # the first replay loads the replay kernels (compiles them on an empty cache)
            replay_first = perf_counter() - t0
            t0 = perf_counter()
    per = (perf_counter() - t0) / max(iters - 2, 1)
    print(f"loss after:  {rosenbrock(p).item():.6g}   at ({p[0].item():.4f}, {p[1].item():.4f})")
    print(f"loading the compiled kernels: {load:.2f} s (none if the descent above loaded them); "
          f"first call (records): {first * 1e3:.3f} ms;\nfirst replay (compiles the replay kernels on an empty "
          f"cache): {replay_first * 1e3:.3f} ms; per iteration afterwards: {per * 1e3:.3f} ms; {step.stats}")


# -- A digits-MLP training demo (needs scikit-learn, imported lazily). ---------


def digits_demo(epochs=3, batch_size=32, lr=3e-3, seed=0):
    """A few epochs of a 64-64-10 ReLU MLP on sklearn's 8x8 digits (see examples/digits_mlp.py)."""
    print("\n== Training an MLP on scikit-learn's 8x8 digits (Adam, minibatches) ==")
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        print("skipped: scikit-learn is not installed (pip install -e \".[examples]\")")
        return
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(X))
    n_test = len(X) // 4
    test, train = perm[:n_test], perm[n_test:]
    mean, std = X[train].mean(0), X[train].std(0)
    std[std == 0] = 1.0
    X = (X - mean) / std
    tg.manual_seed(seed)
    model = tg.nn.Sequential(tg.nn.Linear(64, 64), tg.nn.ReLU(), tg.nn.Linear(64, 10))
    opt = tg.optim.Adam(model.parameters(), lr=lr)
    t0 = perf_counter()
    for epoch in range(epochs):
        order = rng.permutation(train)
        for i in range(0, len(order), batch_size):
            idx = order[i:i + batch_size]
            opt.zero_grad()
            loss = tg.nn.functional.cross_entropy(model(tg.from_numpy(X[idx])), tg.from_numpy(y[idx]))
            loss.backward()
            opt.step()
        with tg.no_grad():
            pred = model(tg.from_numpy(X[test])).numpy().argmax(1)
        print(f"epoch {epoch + 1}: last batch loss {loss.item():.4f}, test accuracy {(pred == y[test]).mean():.4f}")
    print(f"{epochs} epochs on {len(train)} images in {perf_counter() - t0:.2f} s")


def _replay_warmup():
    """Compiled functions of single numbers and of arrays, so replay's forward
    kernels (``replay_scalar``, ``kernels.forward``) and reverse loops compile."""
    f = tg.compile(lambda y, w: (tg.sin(y) * w + tg.cos(y) * 0.5).sum())
    w = tg.tensor([0.5], requires_grad=True)
    f(tg.tensor([0.1]), w).backward()
    f(tg.tensor([0.2]), w).backward()
    g = tg.compile(lambda x, v, labels: -(x @ v + 1.0).relu().log_softmax(1)[np.arange(4), labels].mean())
    v = tg.randn(3, 2, requires_grad=True)
    labels = np.array([0, 1, 1, 0])        # (class labels: the replay's index kernel compiles too)
    for _ in range(2):
        g(tg.randn(4, 3), v, labels).backward()
    return g(tg.randn(4, 3), v, labels) + f(tg.tensor([0.3]), w)


def warmup():
    """One small backward per op family, so the compiled kernels land in Numba's cache,
    then every variant of the compiled sweep (one per combination of families)."""
    t0 = perf_counter()
    _jit.load()         # (else the first small backward passes would be interpreted)
    print(f"  {'numba':<15} {perf_counter() - t0:7.2f} s")
    tg.manual_seed(0)
    a = tg.randn(4, 3, requires_grad=True)
    b = tg.randn(3, 5, requires_grad=True)
    families = {
        "elementwise": lambda: (a.sin() * a.exp() + tg.tanh(a) / 2 - a.relu() ** 2).sum(),
        "reductions": lambda: a.mean() + a.max(dim=1)[0].sum() + tg.logsumexp(a, 1).sum()
                              + tg.softmax(a, 1).var(),
        "indexing/shape": lambda: (a[1:, ::2].reshape(-1).sum() + a[np.array([0, 2])].t().sum()
                                   + tg.cat([a, a], 0).transpose(0, 1).sum()),
        "matmul": lambda: tg.matmul(a, b).sum() + tg.mm(a.t(), a).sum(),
        "replay": _replay_warmup,
    }
    for name, fn in families.items():
        t = perf_counter()
        fn().backward()
        print(f"  {name:<15} {perf_counter() - t:7.2f} s")
    # the reverse sweep is compiled per combination of the families a tape uses
    # (``kernels.sweep.VARIANTS``): the combinations not met above
    t = perf_counter()
    masks = sweep.compile_variants()
    names = ["+".join(FAMILY_NAMES[f] for f in sweep.FAMILIES if m >> f & 1) or "none" for m in masks]
    print(f"  {'sweep variants':<15} {perf_counter() - t:7.2f} s  ({len(masks)}: {', '.join(names)})")
    print(f"warmup done in {perf_counter() - t0:.2f} s")


def main(argv):
    if argv[:1] == ["warmup"]:
        warmup()
    elif argv:
        sys.exit("usage: python -m tapegrad [warmup]")
    else:
        optimize(seed_examples())
        replay_demo()
        digits_demo()


if __name__ == "__main__":
    main(sys.argv[1:])
