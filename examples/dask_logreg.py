"""Logistic regression on 4,000,000 x 32 synthetic rows, fitted with L-BFGS-B on a Dask cluster.

    pip install -e ".[dask]"
    python examples/dask_logreg.py [--rows N] [--cols D] [--chunks K] [--scheduler ADDRESS]

The data are generated on the workers (dask.array's random generator, chunked
along rows) and never leave them; ``tapegrad.distributed.DataParallel`` evaluates
the loss and its gradient there, each worker replaying a tape recorded once per
chunk shape, and ``scipy.optimize.minimize(obj.scipy_objective(), x0, jac=True,
method="L-BFGS-B")`` fits it.  By default on a LocalCluster of 2 worker processes
with one thread each; ``--scheduler tcp://host:8786`` uses a running cluster.

Prints the time per evaluation of the fit on the cluster, of the same fit with the
single-process recorded tape (``tg.record``) on the data gathered into this
process, and of one evaluation written by hand with Dask arrays and NumPy
(``X.T @ s`` in dask.array), and the same comparison with dask-ml's
LogisticRegression when dask-ml is installed.
"""
import os
import sys

if __name__ == "__main__":
    # one BLAS thread here, as in the workers (Dask sets the same there): the
    # comparison is 2 workers of one thread against one process of one thread
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import argparse
from time import perf_counter

import numpy as np
from scipy.optimize import minimize

import tapegrad as tg


def logistic_loss(w, b, X, y):
    """The negative log-likelihood of labels y = +-1 on the rows of X."""
    z = X @ w + b
    return tg.log1p(tg.exp(-y * z)).sum()


def synthetic(rows, cols, chunk_rows, seed=0):
    """X standard normal; y = +-1 drawn from the logistic model of a fixed weight vector."""
    import dask.array as da
    rng = da.random.default_rng(seed)
    X = rng.standard_normal((rows, cols), chunks=(chunk_rows, cols))
    w_true = np.linspace(-1.0, 1.0, cols) * 2 / np.sqrt(cols)
    p = 1.0 / (1.0 + da.exp(-(X @ w_true + 0.5)))
    y = da.where(rng.random(rows, chunks=chunk_rows) < p, 1.0, -1.0)
    return X, y, w_true


def _load_kernels():
    """Load tapegrad's compiled kernels (a process interprets its first backward
    passes in NumPy, then loads them): done up front so the timings compare them."""
    from tapegrad import _jit
    _jit.load()
    return True


def _hand_written_dask(X, y, cols):
    """(value, gradient) of the same loss written with dask.array and NumPy."""
    import dask
    import dask.array as da

    def f(x):
        w, b = x[:cols], x[cols]
        z = X @ w + b
        s = -y / (1.0 + da.exp(y * z))
        value, gw, gb = dask.compute(da.log1p(da.exp(-y * z)).sum(), X.T @ s, s.sum())
        return float(value), np.concatenate([gw, [gb]])
    return f


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=4_000_000, help="rows of synthetic data (default 4,000,000)")
    ap.add_argument("--cols", type=int, default=32, help="features (default 32)")
    ap.add_argument("--chunks", type=int, default=8, help="chunks along the rows (default 8)")
    ap.add_argument("--scheduler", help="address of a running Dask scheduler (default: a LocalCluster of 2 x 1)")
    ap.add_argument("--maxiter", type=int, default=200)
    ap.add_argument("--hand-evals", type=int, default=3, help="evaluations of the hand-written Dask gradient")
    args = ap.parse_args(argv)

    from distributed import Client, LocalCluster

    from tapegrad.distributed import DataParallel

    if args.scheduler:
        cluster, client = None, Client(args.scheduler)
    else:
        import dask

        from tapegrad.distributed import LOCAL_CLUSTER_CONFIG
        with dask.config.set(LOCAL_CLUSTER_CONFIG):     # glibc's own malloc thresholds in the workers
            cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address=":0")
        client = Client(cluster)
    res = {}
    try:
        client.run(_load_kernels)
        _load_kernels()
        workers = client.nthreads()
        print("cluster: %d workers, %d threads" % (len(workers), sum(workers.values())))
        chunk_rows = -(-args.rows // args.chunks)
        X, y, w_true = synthetic(args.rows, args.cols, chunk_rows)
        t0 = perf_counter()
        obj = DataParallel(logistic_loss, data=(X, y), client=client, reduction="sum")
        print("%d x %d rows in %d chunks generated and persisted on the workers in %.1f s"
              % (args.rows, args.cols, obj.num_chunks, perf_counter() - t0))
        x0 = np.zeros(args.cols + 1)
        f = obj.scipy_objective(np.zeros(args.cols), np.zeros(()))
        f(x0)                                   # (each worker records its tapes)
        evals = [0]

        def counted(x):
            evals[0] += 1
            return f(x)
        t0 = perf_counter()
        fit = minimize(counted, x0, jac=True, method="L-BFGS-B", options={"maxiter": args.maxiter})
        dist_s = (perf_counter() - t0) / evals[0]
        print("DataParallel fit: %d evaluations, %.4f s per evaluation, loss %.6g, %s"
              % (evals[0], dist_s, fit.fun, fit.message))

        # the same fit in this process, with the recorded tape on the gathered data
        Xl, yl = client.compute([obj._data[0], obj._data[1]], sync=True)
        tape = tg.record(logistic_loss, np.zeros(args.cols), np.zeros(()), Xl, yl)
        single_evals = [0]

        def single(x):
            single_evals[0] += 1
            v, (gw, gb) = tape.value_and_grad(x[:args.cols], x[args.cols:].reshape(()), Xl, yl, argnums=(0, 1))
            return v, np.concatenate([gw, np.reshape(gb, 1)])
        single(x0)
        single_evals[0] = 0
        t0 = perf_counter()
        fit1 = minimize(single, x0, jac=True, method="L-BFGS-B", options={"maxiter": args.maxiter})
        single_s = (perf_counter() - t0) / single_evals[0]
        print("single-process tape fit: %d evaluations, %.4f s per evaluation, loss %.6g"
              % (single_evals[0], single_s, fit1.fun))
        print("speed-up per evaluation: %.2fx; largest |x - x_single|: %.2e"
              % (single_s / dist_s, np.max(np.abs(fit.x - fit1.x))))
        res.update(x=fit.x, x_single=fit1.x, fun=fit.fun, fun_single=fit1.fun, success=bool(fit.success),
                   dist_s=dist_s, single_s=single_s, evals=evals[0], w_true=w_true)

        # the same gradient written by hand with dask.array
        hand = _hand_written_dask(obj._data[0], obj._data[1], args.cols)
        hand(fit.x)
        t0 = perf_counter()
        for _ in range(args.hand_evals):
            hv, hg = hand(fit.x)
        hand_s = (perf_counter() - t0) / max(args.hand_evals, 1)
        v_opt, g_opt = f(fit.x)
        print("hand-written Dask+NumPy gradient: %.4f s per evaluation (same value to %.1e)"
              % (hand_s, abs(hv - v_opt) / abs(v_opt)))
        res.update(hand_s=hand_s, hand_rel=abs(hv - v_opt) / abs(v_opt), hand_grad=hg, grad=g_opt)
        try:
            import dask_ml  # noqa: F401
        except ImportError:
            print("dask-ml is not installed: skipped the comparison with dask_ml.linear_model.LogisticRegression")
            res["dask_ml"] = None
        else:
            from dask_ml.linear_model import LogisticRegression
            t0 = perf_counter()
            m = LogisticRegression(penalty="none", solver="lbfgs", max_iter=args.maxiter, fit_intercept=True)
            m.fit(obj._data[0], (obj._data[1] > 0).astype(int))
            res["dask_ml"] = perf_counter() - t0
            print("dask-ml LogisticRegression(solver='lbfgs'): %.2f s for the whole fit" % res["dask_ml"])
        obj.close()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return res


if __name__ == "__main__":
    main()
    sys.exit(0)
