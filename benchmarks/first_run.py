"""A first run on an empty Numba cache: the longest single pause of a training loop.

    python benchmarks/first_run.py [--code DIR] [--foreground] [SCENARIO ...]

Each scenario runs in a new process with a new, empty NUMBA_CACHE_DIR (a temporary
directory), importing tapegrad from DIR (default: this checkout; pass another
checkout to compare; ``--foreground``: with TAPEGRAD_BACKGROUND_COMPILE=0, the
kernels compiled inside the first backward that wants them).  Every iteration (forward, backward, optimizer step) is timed
with time.perf_counter; the longest one and the total are printed.  After a
scenario the script waits for the background compile it started, so that the next
one starts on an idle second core.

Scenarios:
  demo      the loops of ``python -m tapegrad``: the Rosenbrock descent with plain
            tensors (2,000 steps), the same descent ``tg.compile``d (2,000 steps,
            after the demo's request for the compiled kernels), 3 epochs of the
            digits MLP (needs scikit-learn)
  replay    a 2,000-step ``tg.compile``d Rosenbrock descent alone
  digits    digits MLP epochs until the compiled kernels are ready, then 2 more
            (the switch from interpreted to compiled backward, timed)
  total     the wall time of ``python -m tapegrad`` as a whole
"""
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Pauses:
    def __init__(self):
        self.worst = 0.0
        self.worst_at = None
        self.total = 0.0
        self.n = 0
        self.first = None

    def time(self, step, label=None):
        t = time.perf_counter()
        out = step()
        dt = time.perf_counter() - t
        self.n += 1
        self.total += dt
        if self.first is None:
            self.first = dt
        if dt > self.worst:
            self.worst, self.worst_at = dt, label if label is not None else self.n
        return out

    def report(self):
        return {"iterations": self.n, "longest_s": round(self.worst, 4), "longest_at": self.worst_at,
                "first_s": None if self.first is None else round(self.first, 4), "total_s": round(self.total, 3)}


def _ready():
    from tapegrad import _jit
    return bool(getattr(_jit, "READY", _jit.LOADED)[0])


def _rosenbrock(xy):
    x, y = xy[0], xy[1]
    return (1 - x) ** 2 + 100 * (y - x ** 2) ** 2


def _eager_descent(iters=2000, lr=1e-3):
    import tapegrad as tg
    p = tg.tensor([-1.5, 2.0], requires_grad=True)
    P = Pauses()

    def step():
        nonlocal p
        _rosenbrock(p).backward()
        with tg.no_grad():
            p -= lr * p.grad
        p.grad = None
    for _ in range(iters):
        P.time(step)
    return P


def _compiled_descent(iters=2000, lr=1e-3, demo=False):
    """``demo``: as ``python -m tapegrad`` does before its replayed descent, ask for the
    compiled kernels (checkouts without ``tapegrad._background`` load them at once)."""
    import tapegrad as tg
    from tapegrad import _jit
    P = Pauses()
    if demo:
        try:
            from tapegrad import _background
        except ImportError:
            P.time(_jit.load, "load")
        else:
            if _background.stamp_valid() or not _background.deferring():
                P.time(_jit.load, "load")
            else:
                P.time(_background.request, "request")
    p = tg.tensor([-1.5, 2.0], requires_grad=True)
    f = tg.compile(_rosenbrock)

    def step():
        nonlocal p
        f(p).backward()
        with tg.no_grad():
            p -= lr * p.grad
        p.grad = None
    for _ in range(iters):
        P.time(step)
    r = P.report()
    r["loss_after"] = float(_rosenbrock(p).item())
    r["replays"] = f.stats.replays
    return r


def _digits(epochs=3, until_ready=False, batch_size=32, lr=3e-3, seed=0, max_s=600):
    import numpy as np
    from sklearn.datasets import load_digits
    import tapegrad as tg
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
    before, after = Pauses(), Pauses()      # iterations with interpreted, with compiled backward
    t0 = time.perf_counter()
    epoch = extra = 0
    while True:
        order = rng.permutation(train)
        for i in range(0, len(order), batch_size):
            idx = order[i:i + batch_size]

            def step():
                opt.zero_grad()
                loss = tg.nn.functional.cross_entropy(model(tg.from_numpy(X[idx])), tg.from_numpy(y[idx]))
                loss.backward()
                opt.step()
            (after if _ready() else before).time(step, (epoch, i // batch_size))
        epoch += 1
        if not until_ready:
            if epoch == epochs:
                break
        elif _ready():
            extra += 1
            if extra > 2:
                break
        if time.perf_counter() - t0 > max_s:
            break
    with tg.no_grad():
        acc = float((model(tg.from_numpy(X[test])).numpy().argmax(1) == y[test]).mean())
    # (compiled: "first_s" is the iteration that switched to the compiled backward)
    return {"epochs": epoch, "interpreted": before.report(), "compiled": after.report(), "test_accuracy": acc,
            "seconds_until_ready": round(time.perf_counter() - t0, 1) if _ready() else None}


def child(name):
    t0 = time.perf_counter()
    import tapegrad as tg       # noqa: F401
    out = {"import_s": round(time.perf_counter() - t0, 3)}
    if name == "demo":
        w = tg.tensor([[1., 2.]], requires_grad=True)
        P = Pauses()
        P.time(lambda: tg.mm(w, tg.tensor([[1.], [1.]])).backward())
        out["seed_example"] = P.report()
        out["eager_descent"] = _eager_descent().report()
        out["compiled_descent"] = _compiled_descent(demo=True)
        out["digits"] = _digits()
    elif name == "replay":
        out["compiled_descent"] = _compiled_descent()
    elif name == "digits":
        out["digits"] = _digits(until_ready=True)
    out["kernels_ready_at_end"] = _ready()
    out["total_s"] = round(time.perf_counter() - t0, 2)
    print(json.dumps(out))


def _wait_for_background(cache):
    """Until the compile process this scenario started has finished (it holds the lock)."""
    lock = os.path.join(cache, "tapegrad-kernels.lock")
    if not os.path.exists(lock):
        return 0.0
    import fcntl
    t = time.perf_counter()
    with open(lock, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
    return time.perf_counter() - t


def run(name, code, foreground=False):
    cache = tempfile.mkdtemp(prefix="tapegrad-first-run-")
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=code)
    for k in ("TAPEGRAD_INTERPRET", "TAPEGRAD_BACKGROUND_COMPILE", "TAPEGRAD_QUIET"):
        env.pop(k, None)
    if foreground:
        env["TAPEGRAD_BACKGROUND_COMPILE"] = "0"
    load0 = os.getloadavg()
    t = time.perf_counter()
    if name == "total":
        p = subprocess.run([sys.executable, "-m", "tapegrad"], capture_output=True, text=True, env=env, cwd=code)
        res = {"wall_s": round(time.perf_counter() - t, 2)}
    else:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name], capture_output=True,
                           text=True, env=env, cwd=code)
        res = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {}
        res["wall_s"] = round(time.perf_counter() - t, 2)
    if p.returncode != 0:
        res["error"] = p.stderr[-2000:]
    res["stderr_notices"] = [ln for ln in p.stderr.splitlines() if ln.startswith("tapegrad:")]
    res["background_compile_after_exit_s"] = round(_wait_for_background(cache), 1)
    res["loadavg_before"] = [round(x, 2) for x in load0]
    res["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    return res


def main(argv):
    if argv[:1] == ["--child"]:
        return child(argv[1])
    code = HERE
    if argv[:1] == ["--code"]:
        code, argv = os.path.abspath(argv[1]), argv[2:]
    foreground = argv[:1] == ["--foreground"]
    if foreground:
        argv = argv[1:]
    names = argv or ["demo", "replay", "total"]
    print("# tapegrad from %s%s; %d CPUs; load average %s" % (code, " (foreground compile)" if foreground else "",
                                                             os.cpu_count(), os.getloadavg()))
    for name in names:
        res = run(name, code, foreground)
        print(name, json.dumps(res, indent=1))
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
