"""Newton's method with SciPy's trust-ncg, fed a recorded tape's gradient and Hessian-vector products.

    python examples/newton_trust_ncg.py [--n N] [--method trust-ncg|Newton-CG] [--torch]

    f(x) = sum_i 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2,   minimum 0 at x = 1, start in [0, 2]^n

``scipy.optimize.minimize(method="trust-ncg", jac=True, hessp=...)`` takes the value
and gradient from ``RecordedTape.value_and_grad`` and ``H p`` from
``RecordedTape.hvp`` (one tangent pass and one forward-over-reverse pass over the tape
recorded once).  With ``--torch`` (PyTorch installed) the same run is made with
PyTorch: ``backward()`` and ``torch.autograd.functional.hvp``; both are timed per
iteration and per Hessian-vector product.
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


def run(name, fun, hessp, x0, method):
    calls = [0]

    def counted(x, p):
        calls[0] += 1
        return hessp(x, p)
    fun(x0), hessp(x0, x0)                        # first calls (kernels loaded) outside the clock
    t0 = perf_counter()
    tol = {"xtol": 1e-10} if method == "Newton-CG" else {"gtol": 1e-8}
    res = minimize(fun, x0, jac=True, hessp=counted, method=method, options={"maxiter": 2000, **tol})
    elapsed = perf_counter() - t0
    t1 = perf_counter()
    for _ in range(20):
        hessp(res.x, x0)
    per_hvp = (perf_counter() - t1) / 20
    print(f"{name:9s} {method}: {res.message}")
    print(f"          iterations {res.nit}, gradients {res.njev}, Hessian-vector products {calls[0]}, "
          f"final value {res.fun:.3e}, max |x - 1| {np.abs(res.x - 1).max():.1e}")
    print(f"          {elapsed:.3f} s, {elapsed / max(res.nit, 1) * 1e3:.3f} ms per iteration, "
          f"{per_hvp * 1e3:.3f} ms per H p")
    return {"nit": int(res.nit), "nhvp": calls[0], "time_s": elapsed, "per_iter_ms": elapsed / max(res.nit, 1) * 1e3,
            "per_hvp_ms": per_hvp * 1e3, "fun": float(res.fun), "x": res.x, "success": bool(res.success)}


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
    out = {"tapegrad": run("tapegrad", *tapegrad_oracles(x0), x0, args.method)}
    if args.torch:
        import torch
        torch.set_num_threads(1)
        torch.set_default_dtype(torch.float64)
        out["torch"] = run("PyTorch", *torch_oracles(torch), x0, args.method)
        print(f"tapegrad / PyTorch per iteration: {out['tapegrad']['per_iter_ms'] / out['torch']['per_iter_ms']:.2f}, "
              f"per H p: {out['tapegrad']['per_hvp_ms'] / out['torch']['per_hvp_ms']:.2f}")
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
