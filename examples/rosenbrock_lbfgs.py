"""Minimise the n-dimensional Rosenbrock function with SciPy's L-BFGS-B and tapegrad gradients.

    pip install -e ".[examples]"        # only scipy is needed, a core dependency
    python examples/rosenbrock_lbfgs.py [--n N] [--maxiter K] [--seed S]

    f(x) = sum_i 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2,   minimum 0 at x = 1.

``scipy.optimize.minimize(method="L-BFGS-B", jac=True)`` calls a value-and-gradient
function: by default the ``value_and_grad`` of a tape recorded once with
``tg.record`` and replayed at every point; with ``--eager``, ``value_and_grad``
below, which records the ops afresh at each call.
Prints iterations, time, the number of function/gradient evaluations, the final
value and max |x - 1|.
"""
import argparse
import sys
from time import perf_counter

import numpy as np
from scipy.optimize import minimize

import tapegrad as tg


def rosenbrock(x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def value_and_grad(x_np):
    """f and df/dx at a NumPy point, as SciPy's ``jac=True`` wants them (eager:
    each call records the ops afresh)."""
    x = tg.tensor(x_np, requires_grad=True)
    f = rosenbrock(x)
    f.backward()
    return f.item(), x.grad.numpy().copy()


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1000, help="dimension")
    p.add_argument("--maxiter", type=int, default=20000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eager", action="store_true", help="record at every call instead of replaying one tape")
    return p.parse_args(argv)


def main(argv=None):
    """Run the minimisation; return a dict with nit, nfev, time_s, fun and max_err."""
    args = parse_args(argv)
    rng = np.random.default_rng(args.seed)
    x0 = rng.uniform(-2.0, 2.0, args.n)        # random start in [-2, 2]^n
    if args.eager:
        fun = value_and_grad
    else:
        fun = tg.record(rosenbrock, x0).value_and_grad     # record once, replay per point
    fun(x0)                                     # load the compiled sweep before timing
    t0 = perf_counter()
    res = minimize(fun, x0, jac=True, method="L-BFGS-B",
                   options={"maxiter": args.maxiter, "maxfun": 4 * args.maxiter,
                            "ftol": 1e-15, "gtol": 1e-10, "maxcor": 20})
    elapsed = perf_counter() - t0
    max_err = float(np.abs(res.x - 1).max())
    print(f"Rosenbrock, n = {args.n}, L-BFGS-B ({'eager' if args.eager else 'replayed tape'}): {res.message}")
    print(f"iterations: {res.nit}   function/gradient evaluations: {res.nfev}")
    print(f"time: {elapsed:.3f} s  ({elapsed / res.nfev * 1e3:.3f} ms per value-and-gradient, incl. SciPy)")
    print(f"final value: {res.fun:.3e}   max |x - 1|: {max_err:.3e}")
    return {"nit": int(res.nit), "nfev": int(res.nfev), "time_s": elapsed, "fun": float(res.fun),
            "max_err": max_err, "success": bool(res.success)}


if __name__ == "__main__":
    main(sys.argv[1:])
