"""Newton's method with SciPy's trust-ncg, fed a recorded tape's gradient and Hessian-vector products.

    python examples/newton_trust_ncg.py [--n N] [--method trust-ncg|Newton-CG] [--torch]

    f(x) = sum_i 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2,   minimum 0 at x = 1, start in [0, 2]^n

``scipy.optimize.minimize(method="trust-ncg", jac=True, hessp=...)`` takes the value
and gradient from ``RecordedTape.value_and_grad`` and ``H p`` from
``RecordedTape.hvp`` (one tangent pass and one forward-over-reverse pass over the tape
recorded once).  With ``--torch`` (PyTorch installed) the same run is made with
PyTorch: ``backward()`` and ``torch.autograd.functional.hvp``; both are timed per
iteration and per Hessian-vector product.

The minimisation runs twice.  The first run is what a new process sees: tapegrad's
compiled kernels and the tape's compiled forward-over-reverse program are built in the
background (or loaded from Numba's disk cache) while NumPy walks of the tape serve the
first calls.  The second run starts once that is done: the steady state of a process
that minimises again and again.
"""
import argparse
import sys
from time import perf_counter

import numpy as np
from scipy.optimize import minimize

import tapegrad as tg


def objective(lib):
    """Rosenbrock written with ``lib``'s operations (tapegrad or torch)."""
    def f(x):
        h = x[:-1]
        return (100 * (x[1:] - h ** 2) ** 2 + (1 - h) ** 2).sum()
    return f


def tapegrad_oracles(x0):
    tape = tg.record(objective(tg), x0)       # recorded once, replayed at every point
    return tape.value_and_grad, lambda x, p: tape.hvp(x, p)[1]


def torch_oracles(torch):
    f = objective(torch)

    def value_and_grad(x):
        t = torch.tensor(x, requires_grad=True)
        y = f(t)
        y.backward()
        return y.item(), t.grad.numpy().copy()

    def hessp(x, p):
        return torch.autograd.functional.hvp(f, torch.tensor(x), torch.tensor(p))[1].numpy()
    return value_and_grad, hessp


def settle_tapegrad():
    """Wait for tapegrad's background work: the compiled kernels loaded and the tape's
    forward-over-reverse program compiled (both cached on disk for later processes)."""
    from tapegrad import _jit
    from tapegrad.autograd import tangent_program
    _jit.load()
    tangent_program.wait()


def minimise(fun, hessp, x0, method):
    """(result, Hessian-vector products asked for, seconds)."""
    calls = [0]

    def counted(x, p):
        calls[0] += 1
        return hessp(x, p)
    tol = {"xtol": 1e-10} if method == "Newton-CG" else {"gtol": 1e-8}
    t0 = perf_counter()
    res = minimize(fun, x0, jac=True, hessp=counted, method=method, options={"maxiter": 2000, **tol})
    return res, calls[0], perf_counter() - t0


def run(name, fun, hessp, x0, method, settle=None):
    """The minimisation from a new process's first call, then again once ``settle()`` has
    returned (the steady state), timed per iteration and per H p."""
    first, _, first_s = minimise(fun, hessp, x0, method)
    if settle is not None:
        settle()
    res, nhvp, elapsed = minimise(fun, hessp, x0, method)
    t1 = perf_counter()
    for _ in range(20):
        hessp(res.x, x0)
    per_hvp = (perf_counter() - t1) / 20
    per_iter = elapsed / max(res.nit, 1) * 1e3
    print(f"{name:9s} {method}: {res.message}")
    print(f"          iterations {res.nit}, gradients {res.njev}, Hessian-vector products {nhvp}, "
          f"final value {res.fun:.3e}, max |x - 1| {np.abs(res.x - 1).max():.1e}")
    print(f"          first run {first_s:.3f} s; then {elapsed:.3f} s, {per_iter:.3f} ms per iteration, "
          f"{per_hvp * 1e3:.3f} ms per H p")
    return {"nit": int(res.nit), "nhvp": nhvp, "first_run_s": first_s, "time_s": elapsed, "per_iter_ms": per_iter,
            "per_hvp_ms": per_hvp * 1e3, "fun": float(res.fun), "x": res.x, "success": bool(res.success),
            "first_success": bool(first.success)}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1000, help="dimension")
    p.add_argument("--method", default="trust-ncg", choices=["trust-ncg", "Newton-CG", "trust-krylov"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--torch", action="store_true", help="also run with PyTorch's gradients and hvp")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    x0 = np.random.default_rng(args.seed).uniform(0.0, 2.0, args.n)
    print(f"n = {args.n}")
    out = {"tapegrad": run("tapegrad", *tapegrad_oracles(x0), x0, args.method, settle=settle_tapegrad)}
    if args.torch:
        import torch
        torch.set_num_threads(1)
        torch.set_default_dtype(torch.float64)
        out["torch"] = run("PyTorch", *torch_oracles(torch), x0, args.method)
        tg_, pt = out["tapegrad"], out["torch"]
        print(f"tapegrad / PyTorch, first run: {tg_['first_run_s'] / pt['first_run_s']:.2f}; then per iteration: "
              f"{tg_['per_iter_ms'] / pt['per_iter_ms']:.2f}, per H p: {tg_['per_hvp_ms'] / pt['per_hvp_ms']:.2f}")
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
