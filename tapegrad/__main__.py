"""A short tour of tapegrad:  ``python -m tapegrad``  (or ``python -m tapegrad warmup``, ``--version``).

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
from tapegrad.core.registry import BINARY2, FAMILY_NAMES, UNARY2


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


def _kernels_state():
    return "compiled" if _jit.READY[0] else "interpreted (the compiled kernels are not ready yet)"


def optimize(first_backward, iters=2000, lr=1e-3):
    print("\n== Gradient descent on the 2-D Rosenbrock function (plain tensors) ==")
    p = tg.tensor([-1.5, 2.0], requires_grad=True)
    first = None
    switched_at = None
    t0 = perf_counter()
    for i in range(iters):
        t = perf_counter()
        was_ready = _jit.READY[0]
        loss = rosenbrock(p)
        loss.backward()
        if not was_ready and _jit.READY[0]:
            switched_at = (i, perf_counter() - t)
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
    if switched_at is not None:
        i, dt = switched_at
        print(f"iteration {i} was the first with the compiled sweep: {dt * 1e3:.1f} ms")
    per = (total - first) / (iters - 1)
    print(f"first iteration: {first * 1e3:.3f} ms; per iteration afterwards: {per * 1e3:.3f} ms;"
          f" backward at the end: {_kernels_state()}")


def replay_demo(iters=2000, lr=1e-3):
    """The same descent with the loss recorded once and replayed (tg.compile)."""
    print("\n== The same descent, recorded once and replayed (tg.compile) ==")
    # replays are for loops that run long: the compiled kernels now if the cache has them
    # (loading them is a pause of a second or two), else their compile starts in the
    # background and the replays run in NumPy meanwhile
    from tapegrad import _background
    if not _jit.READY[0] and (_background.stamp_valid() or not _background.deferring()):
        t = perf_counter()
        _jit.load()
        print(f"loading the compiled kernels: {perf_counter() - t:.2f} s")
    else:
        _background.request()
    p = tg.tensor([-1.5, 2.0], requires_grad=True)
    step = tg.compile(rosenbrock)
    t = perf_counter()
    step(p).backward()
    first = perf_counter() - t
    with tg.no_grad():
        p -= lr * p.grad
    p.grad = None
    t0 = perf_counter()
    longest = 0.0
    for i in range(iters - 1):
        t = perf_counter()
        step(p).backward()
        with tg.no_grad():
            p -= lr * p.grad
        p.grad = None
        longest = max(longest, perf_counter() - t)
    per = (perf_counter() - t0) / max(iters - 1, 1)
    print(f"loss after:  {rosenbrock(p).item():.6g}   at ({p[0].item():.4f}, {p[1].item():.4f})")
    print(f"first call (records): {first * 1e3:.3f} ms; per iteration afterwards: {per * 1e3:.3f} ms "
          f"(longest {longest * 1e3:.1f} ms); {step.stats}; at the end: {_kernels_state()}")


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


def _family_losses():
    tg.manual_seed(0)
    a = tg.randn(4, 3, requires_grad=True)
    b = tg.randn(3, 5, requires_grad=True)
    return {
        "select": lambda: a[1, 2],      # the quickest to compile: the sweep for shape ops alone
        "elementwise": lambda: (a.sin() * a.exp() + tg.tanh(a) / 2 - a.relu() ** 2).sum(),
        # the second table's kernels: compiled once a backward meets one of its ops
        "more elementwise": lambda: (tg.hypot(a, a.exp()) + tg.nn.functional.softplus(a)).sum(),
        "reductions": lambda: a.mean() + a.max(dim=1)[0].sum() + tg.logsumexp(a, 1).sum()
                              + tg.softmax(a, 1).var(),
        "indexing/shape": lambda: (a[1:, ::2].reshape(-1).sum() + a[np.array([0, 2])].t().sum()
                                   + tg.cat([a, a], 0).transpose(0, 1).sum()),
        "matmul": lambda: tg.matmul(a, b).sum() + tg.mm(a.t(), a).sum(),
        "replay": _replay_warmup,
    }


def _progress(total, quiet):
    """tqdm's bar when it is installed (on a terminal), else nothing; a plain line per
    group is printed either way (``tqdm.write`` keeps it clear of the bar)."""
    try:
        if quiet:
            raise ImportError
        from tqdm import tqdm
    except ImportError:
        return None, print
    bar = tqdm(total=total, desc="tapegrad warmup", unit="group", disable=None, leave=False)
    return bar, bar.write


def warmup(only=None, background=False):
    """One small backward per op family, so the compiled kernels land in Numba's cache,
    then every variant of the compiled sweep (one per group of families it covers);
    one line per group with the time it took.  ``only``: the groups to do (their
    names, see ``_background.GROUPS``).  The compile holds the cache's lock (one
    process compiles at a time) and ends by writing the stamp that tells other
    processes the kernels are ready.  ``background``: the process a first run starts
    (``tapegrad._background``): nothing to do if another one compiled meanwhile."""
    from tapegrad import _background
    groups = list(_background.GROUPS if only is None else only)
    unknown = sorted(set(groups) - set(_background.GROUPS))
    if unknown:
        sys.exit("warmup: unknown group %s (groups: %s)" % (", ".join(unknown), ", ".join(_background.GROUPS)))
    t0 = perf_counter()
    lock = _background.lock()       # (waits while another process compiles)
    _background.ONLY = only
    if background and _background.stamp_valid():
        print("warmup: another process compiled the kernels meanwhile (%.2f s)" % (perf_counter() - t0))
        return
    families = _family_losses()
    variants = "sweep variants" in groups
    steps = ["numba"] + [g for g in families if g in groups]
    if variants:
        steps += ["sweep: " + _variant_name(m) for m in sweep.VARIANTS]
    bar, say = _progress(len(steps), background)
    say(f"warmup: compiling {len(steps)} groups of kernels (or loading them from Numba's cache)")
    try:
        for step in steps:
            if bar is not None:
                bar.set_postfix_str(step)
            t = perf_counter()
            if step == "numba":
                _jit.load()         # (else the first small backward passes would be interpreted)
            elif step in families:
                families[step]().backward()
            else:
                _compile_variant(step)
            say(f"  {step:<28} {perf_counter() - t:7.2f} s")
            if bar is not None:
                bar.update()
    finally:
        if bar is not None:
            bar.close()
    _background.write_stamp(groups)
    if lock is not None:        # (None: no disk cache for the kernels, nothing kept)
        lock.close()
    print(f"warmup done in {perf_counter() - t0:.2f} s")


def _variant_name(m):
    # (the second elementwise table's families ride with the first: not named apart)
    return "+".join(FAMILY_NAMES[f] for f in sweep.FAMILIES if m >> f & 1 and f not in _SECOND) or "none"


_SECOND = (UNARY2, BINARY2)


_SIGS = []


def _compile_variant(step):
    """One variant of the sweep (``kernels.sweep.VARIANTS``) for every argument types
    the sweep was compiled for by the groups before."""
    if not _SIGS:
        _SIGS.append({sig for r in list(sweep._VARIANTS.values()) for sig in r.signatures})
    m = next(v for v in sweep.VARIANTS if "sweep: " + _variant_name(v) == step)
    r = sweep._new_run(m)
    for sig in _SIGS[0]:
        r.compile(sig)


USAGE = ("usage: python -m tapegrad [warmup [--only GROUP,...]] | --version\n"
         "  (no argument)  a short tour: PyTorch's seed examples, a gradient descent, an MLP on digits\n"
         "  warmup         compile every kernel into Numba's disk cache now, with progress\n"
         "  --version      print tapegrad's version")


def main(argv):
    if argv == ["--version"]:
        print("tapegrad", tg.__version__)
    elif argv[:1] == ["warmup"]:
        rest, only, background = argv[1:], None, False
        while rest:
            if rest[0] == "--background":
                background = True
                rest = rest[1:]
            elif rest[0] == "--only" and len(rest) > 1:
                only = [g for g in rest[1].split(",") if g]
                rest = rest[2:]
            else:
                sys.exit(USAGE)
        warmup(only, background)
    elif argv:
        sys.exit(USAGE)
    else:
        optimize(seed_examples())
        replay_demo()
        digits_demo()


if __name__ == "__main__":
    main(sys.argv[1:])
