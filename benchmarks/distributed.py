"""tapegrad.distributed.DataParallel against the single-process recorded tape.

    pip install -e ".[dask]"
    python benchmarks/distributed.py [--rows N] [--cols D] [--chunks K] [--repeat R] [--json PATH]

On a LocalCluster of 2 worker processes with one thread each, side by side in one run:

* speed: value_and_grad of the logistic loss over N x D rows (4,000,000 x 32 by
  default), median seconds per call of the single-process recorded tape
  (``tg.record(...).value_and_grad(..., argnums=(0, 1))``, one BLAS thread) and of
  ``DataParallel`` (the cluster's start-up and the data's persisting not counted);
  target: a speed-up >= 1.6;
* overhead: a call on 1,000 rows in 2 chunks, median milliseconds; target <= 30 ms;
* for reference, the single process evaluating the same blocks of rows as the
  workers (``DataParallel`` evaluates each chunk in blocks of about 4 MiB, which the
  reverse pass finds in the cache): the part of the speed-up the blocking gives;
* equality: the relative difference of value and gradients between the two; target <= 1e-12.

The data are generated on the workers (dask.array's random generator) and
computed into the client once for the single-process tape.
"""
import os
import sys

if __name__ == "__main__":
    # run as a script, this file's directory comes first on sys.path, where this
    # module would shadow the ``distributed`` package it uses
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    # one BLAS thread in this process, as in the workers (Dask sets the same there)
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import argparse
import json
import statistics
import time
from time import perf_counter

import numpy as np

# (no names with asv's prefixes here: asv imports every module in benchmarks/, and
# this one imports Dask only when run)


def logistic_loss(w, b, X, y):
    import tapegrad as tg
    z = X @ w + b
    return tg.log1p(tg.exp(-y * z)).sum()


def _load_kernels():
    """Load tapegrad's compiled kernels now (a process interprets its first backward
    passes in NumPy and loads them after about a second of those)."""
    from tapegrad import _jit
    _jit.load()
    return True


def _median_seconds(fn, repeat, warmup=1):
    """Median seconds of ``repeat`` calls of ``fn`` after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeat):
        t0 = perf_counter()
        fn()
        ts.append(perf_counter() - t0)
    return statistics.median(ts), ts


def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-300))


def synthetic(rows, cols, chunk_rows, seed=0):
    """Logistic-regression data as dask arrays: X standard normal, y = +-1 drawn from
    the logistic model of a fixed weight vector."""
    import dask.array as da
    rng = da.random.default_rng(seed)
    X = rng.standard_normal((rows, cols), chunks=(chunk_rows, cols))
    w_true = np.linspace(-1.0, 1.0, cols) / np.sqrt(cols)
    u = rng.random(rows, chunks=chunk_rows)
    p = 1.0 / (1.0 + da.exp(-(X @ w_true + 0.25)))
    y = da.where(u < p, 1.0, -1.0)
    return X, y


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--cols", type=int, default=32)
    ap.add_argument("--chunks", type=int, default=8, help="chunks of the large data (default 8: 4 per worker)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)

    from distributed import Client, LocalCluster

    import tapegrad as tg
    from tapegrad.distributed import DataParallel

    out = {"rows": args.rows, "cols": args.cols, "chunks": args.chunks, "load": os.getloadavg()}
    print("load average before: %.2f %.2f %.2f" % out["load"])
    import dask

    from tapegrad.distributed import LOCAL_CLUSTER_CONFIG
    dask.config.set(LOCAL_CLUSTER_CONFIG)       # glibc's own malloc thresholds in the workers
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        client.run(_load_kernels)
        _load_kernels()
        rng = np.random.default_rng(1)
        w = 0.1 * rng.standard_normal(args.cols)
        b = np.array(0.05)

        # -- overhead per call on tiny data ------------------------------------------
        Xs = rng.standard_normal((1000, args.cols))
        ys = np.where(rng.random(1000) < 0.5, 1.0, -1.0)
        tiny = DataParallel(logistic_loss, data=(Xs, ys), client=client, chunks=500)
        tiny_s, _ = _median_seconds(lambda: tiny.value_and_grad(w, b), 30, warmup=3)
        out["overhead_ms"] = 1e3 * tiny_s
        print("overhead per call, 1,000 rows in 2 chunks: %.1f ms (target <= 30)" % out["overhead_ms"])
        tiny.close()

        # -- speed at scale ---------------------------------------------------------------
        chunk_rows = -(-args.rows // args.chunks)
        X, y = synthetic(args.rows, args.cols, chunk_rows)
        t0 = perf_counter()
        obj = DataParallel(logistic_loss, data=(X, y), client=client)
        print("data persisted on the workers in %.1f s (%d chunks of %d rows)"
              % (perf_counter() - t0, obj.num_chunks, chunk_rows))
        Xl, yl = client.compute([obj._data[0], obj._data[1]], sync=True)
        tape = tg.record(logistic_loss, w, b, Xl, yl)
        # the single process evaluating the same blocks of rows as the workers (the
        # blocking alone, without a cluster): what the parallelism itself adds
        from tapegrad.distributed import BLOCK_BYTES, _block_rows
        step = _block_rows([Xl, yl], BLOCK_BYTES)
        block_tapes = {}

        def blocked():
            total, gw_, gb_ = 0.0, 0.0, 0.0
            for a in range(0, args.rows, step):
                Xb, yb = Xl[a:a + step], yl[a:a + step]
                t = block_tapes.get(Xb.shape)
                if t is None:
                    t = block_tapes[Xb.shape] = tg.record(logistic_loss, w, b, Xb, yb)
                v_, (g1, g2) = t.value_and_grad(w, b, Xb, yb, argnums=(0, 1))
                total, gw_, gb_ = total + v_, gw_ + g1, gb_ + g2
            return total, gw_, gb_

        # the three take turns, so that other work on the machine weighs on each alike
        runs = {"single": lambda: tape.value_and_grad(w, b, Xl, yl, argnums=(0, 1)),
                "blocked": blocked, "distributed": lambda: obj.value_and_grad(w, b)}
        times = {k: [] for k in runs}
        cpu = {"single": 0.0, "workers": None}
        for r in range(args.repeat + 2):
            for k, fn in runs.items():
                c0 = time.process_time()
                w0 = client.run(time.process_time) if k == "distributed" else None
                t0 = perf_counter()
                fn()
                dt = perf_counter() - t0
                if r < 2:
                    continue        # (warm-up)
                times[k].append(dt)
                if k == "single":
                    cpu["single"] += time.process_time() - c0
                elif k == "distributed":
                    w1 = client.run(time.process_time)
                    got = sorted(w1[a] - w0[a] for a in w1 if a in w0)
                    cpu["workers"] = got if cpu["workers"] is None else [x + y for x, y in zip(cpu["workers"], got)]
        single_s, blocked_s, dist_s = (statistics.median(times[k]) for k in ("single", "blocked", "distributed"))
        out["single_blocked_s"] = blocked_s
        out["single_s"], out["distributed_s"] = single_s, dist_s
        out["speedup"] = single_s / dist_s
        out["load_during"] = os.getloadavg()
        print("value_and_grad, %d x %d rows: single-process tape %.3f s, DataParallel on 2 workers x 1 thread "
              "%.3f s: speed-up %.2fx (target >= 1.6)" % (args.rows, args.cols, single_s, dist_s, out["speedup"]))
        print("  the single process in the workers' blocks of %d rows: %.3f s: speed-up %.2fx over it"
              % (step, blocked_s, blocked_s / dist_s))
        # CPU seconds per call, which other processes on the machine inflate less than wall time
        single_cpu = cpu["single"] / args.repeat
        worker_cpu = [c / args.repeat for c in cpu["workers"]]
        out["single_cpu_s"], out["worker_cpu_s"] = single_cpu, worker_cpu
        out["cpu_speedup_estimate"] = single_cpu / max(worker_cpu)
        print("  CPU per call: single process %.3f s, workers %s s: %.2fx as the busier worker's CPU time "
              "(an estimate on an idle machine)" % (single_cpu, " + ".join("%.3f" % c for c in worker_cpu),
                                                     out["cpu_speedup_estimate"]))

        # -- equality -----------------------------------------------------------------------
        w2 = w + 0.05
        v1, (gw1, gb1) = tape.value_and_grad(w2, b, Xl, yl, argnums=(0, 1))
        v2, (gw2, gb2) = obj.value_and_grad(w2, b)
        out["rel_diff"] = max(abs(v2 - v1) / abs(v1), _rel(gw2, gw1), _rel(gb2, gb1))
        print("relative difference from the single-process gradient: %.2e (target <= 1e-12)" % out["rel_diff"])
        obj.close()
    out["load_after"] = os.getloadavg()
    print("load average after: %.2f %.2f %.2f" % out["load_after"])
    out["ok"] = bool(out["speedup"] >= 1.6 and out["overhead_ms"] <= 30 and out["rel_diff"] <= 1e-12)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
