"""tapegrad.distributed.DataParallel on a LocalCluster of processes (loopback only).

Runs where the ``dask`` extra is installed (.ci/run's "distributed tests" block)."""
import os
import signal
import threading
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

import tapegrad as tg                                       # noqa: E402
from tapegrad.distributed import DataParallel               # noqa: E402


def logistic(w, b, X, y):
    z = X @ w + b
    return tg.log1p(tg.exp(-y * z)).sum()


def logistic_mean(w, b, X, y):
    z = X @ w + b
    return tg.log1p(tg.exp(-y * z)).mean()


def least_squares(w, X, t):
    r = X @ w - t
    return (r * r).sum()


class ShortChunkError(Exception):
    pass


def fails_on_short_chunks(w, X, t):
    if X.shape[0] == 120:       # (the last chunk: the client's own check runs the first 2 rows)
        raise ShortChunkError("chunk of %d rows" % X.shape[0])
    return ((X @ w - t) ** 2).sum()


def slow_to_record(w, X, t):
    time.sleep(0.6)         # (Python runs only while recording: each worker's first call is slow)
    return ((X @ w - t) ** 2).sum()


def branchy(w, X, t):
    r = X @ w - t
    if w.sum().item() > 0:          # (a guard: another sign of sum(w) is another tape)
        return (r * r).sum()
    return tg.abs(r).sum()


def not_recordable(w, X, t):
    r = X @ w - t
    return (r * r).sum() + 0.0 * (X @ w).detach().sum()     # (detach feeding the loss: not replayable)


def _two_workers():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=":0")
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def client():
    yield from _two_workers()


def _problem(n=1003, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sign(X @ rng.standard_normal(d) + 0.5 * rng.standard_normal(n))
    return X, y, rng.standard_normal(d), np.array(0.3)


def _rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _single(loss, *args, nparams):
    tape = tg.record(loss, *args)
    return tape.value_and_grad(*args, argnums=tuple(range(nparams)))


def test_sum_with_a_short_last_chunk_and_two_params(client):
    X, y, w, b = _problem()
    obj = DataParallel(logistic, data=(X, y), client=client, reduction="sum", chunks=250)
    assert obj.num_chunks == 5 and obj._chunk_rows == (250, 250, 250, 250, 3)
    v0, (gw0, gb0) = _single(logistic, w, b, X, y, nparams=2)
    for scale in (1.0, -0.5):       # a second call: the workers' tapes replay with new parameters
        ws, bs = w * scale, np.array(b * scale)
        v0, (gw0, gb0) = _single(logistic, ws, bs, X, y, nparams=2)
        v, (gw, gb) = obj.value_and_grad(ws, bs)
        assert isinstance(v, float) and gw.shape == (4,) and np.shape(gb) == ()
        assert abs(v - v0) <= 1e-12 * abs(v0)
        assert _rel(gw, gw0) <= 1e-12 and _rel(gb, gb0) <= 1e-12
    # the figures themselves, by hand
    z = X @ (-0.5 * w) - 0.15
    s = -y / (1 + np.exp(y * z))
    np.testing.assert_allclose(gw, X.T @ s, rtol=1e-12)
    np.testing.assert_allclose(v, np.log1p(np.exp(-y * z)).sum(), rtol=1e-12)
    obj.close()


def test_mean_weights_the_chunks_by_rows(client):
    X, y, w, b = _problem(n=777, seed=1)
    obj = DataParallel(logistic_mean, data=(X, y), client=client, reduction="mean", chunks=300)
    assert obj._chunk_rows == (300, 300, 177)
    v0, (gw0, gb0) = _single(logistic_mean, w, b, X, y, nparams=2)
    v, (gw, gb) = obj.value_and_grad(w, b)
    assert abs(v - v0) <= 1e-12 * abs(v0)
    assert _rel(gw, gw0) <= 1e-12 and _rel(gb, gb0) <= 1e-12
    # (an unweighted mean of the chunks' means would be another number)
    means = [logistic_mean(tg.tensor(w), tg.tensor(b), tg.tensor(X[a:a + 300]), tg.tensor(y[a:a + 300])).item()
             for a in (0, 300, 600)]
    assert abs(np.mean(means) - v0) > 1e-6
    obj.close()


def test_chunks_evaluated_in_blocks_of_rows(client):
    X, y, w, b = _problem(n=1000, seed=12)
    # 40 bytes a row (4 + 1 float64 columns): blocks of 25 rows in chunks of 300 (the last of 100)
    for reduction, loss in (("sum", logistic), ("mean", logistic_mean)):
        obj = DataParallel(loss, data=(X, y), client=client, reduction=reduction, chunks=300, block_bytes=1000)
        v0, (gw0, gb0) = _single(loss, w, b, X, y, nparams=2)
        v, (gw, gb) = obj.value_and_grad(w, b)
        assert abs(v - v0) <= 1e-12 * abs(v0)
        assert _rel(gw, gw0) <= 1e-12 and _rel(gb, gb0) <= 1e-12

        def shapes(token):
            from tapegrad import _dask_parallel as tdist
            return sorted({k[3][0][0] for k in tdist._TAPES if k[0] == token})
        got = set(x for res in client.run(shapes, obj._token).values() for x in res)
        assert got == {(25, 4)}         # one tape per block shape: 300 and 100 are both 25-row blocks
        obj.close()
    obj = DataParallel(logistic, data=(X, y), client=client, chunks=300, block_bytes=1400)   # blocks of 35
    assert obj.value_and_grad(w, b)[0] == pytest.approx(_single(logistic, w, b, X, y, nparams=2)[0], rel=1e-12)
    got = set(x for res in client.run(shapes, obj._token).values() for x in res)
    assert got <= {(35, 4), (20, 4), (30, 4)} and (35, 4) in got     # 300 = 8 x 35 + 20, 100 = 2 x 35 + 30
    obj.close()
    with pytest.raises(ValueError, match="block_bytes must be a positive number"):
        DataParallel(logistic, data=(X, y), client=client, block_bytes=0)


def test_dask_arrays_and_one_param(client):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((1000, 5))
    t = X @ np.arange(5.0) + 0.1 * rng.standard_normal(1000)
    Xd, td = da.from_array(X, chunks=(400, 5)), da.from_array(t, chunks=400)
    obj = DataParallel(least_squares, data=(Xd, td), client=client)
    assert obj._chunk_rows == (400, 400, 200)
    w = rng.standard_normal(5)
    v0, (g0,) = _single(least_squares, w, X, t, nparams=1)
    v, g = obj.value_and_grad(w)
    assert isinstance(g, np.ndarray) and g.shape == (5,)
    assert abs(v - v0) <= 1e-12 * v0 and _rel(g, g0) <= 1e-12
    np.testing.assert_allclose(g, 2 * X.T @ (X @ w - t), rtol=1e-12)
    # rows chunked differently in the second array are rechunked to the first's
    obj2 = DataParallel(least_squares, data=(Xd, da.from_array(t, chunks=250)), client=client)
    assert obj2._chunk_rows == (400, 400, 200)
    assert obj2.value_and_grad(w)[0] == pytest.approx(v0, rel=1e-12)
    obj.close()
    obj2.close()


def test_workers_differentiate_the_parameters_only(client):
    """The chunks' tapes run with argnums = the parameters: the data are constants
    of the replayed tape, not leaves of the reverse sweep."""
    X, y, w, b = _problem(n=600, seed=3)
    obj = DataParallel(logistic, data=(X, y), client=client, chunks=300)
    obj.value_and_grad(w, b)

    def inspect(token):
        from tapegrad import _dask_parallel as tdist
        out = []
        for k, tape in tdist._TAPES.items():
            if k[0] == token:
                out.append((sorted(tape._variants), tape._variants[(0, 1)].arg_kinds))
        return out
    got = [x for res in client.run(inspect, obj._token).values() for x in res]
    assert len(got) == 1 or len(got) == 2        # one chunk shape: one tape per worker that ran a chunk
    for variants, kinds in got:
        assert variants == [(0, 1)]
        assert kinds == ["leaf", "leaf", "data", "data"]
    obj.close()

    def kept(token):        # close() drops the loss and the tapes on the workers
        from tapegrad import _dask_parallel as tdist
        return token in tdist._LOSSES or any(k[0] == token for k in tdist._TAPES)
    assert not any(client.run(kept, obj._token).values())


def test_diverging_and_unrecordable_losses(client):
    rng = np.random.default_rng(11)
    X, t = rng.standard_normal((300, 3)), rng.standard_normal(300)
    wp, wn = np.array([0.5, 0.2, 0.1]), np.array([-0.5, 0.2, 0.1])
    obj = DataParallel(branchy, data=(X, t), client=client, chunks=100)
    for w in (wp, wn, wp):
        r = X @ w - t
        want_v = (r * r).sum() if w.sum() > 0 else np.abs(r).sum()
        want_g = 2 * X.T @ r if w.sum() > 0 else X.T @ np.sign(r)
        v, g = obj.value_and_grad(w)
        assert v == pytest.approx(want_v, rel=1e-12)
        np.testing.assert_allclose(g, want_g, rtol=1e-12, atol=1e-12)
    obj.close()
    with pytest.raises(tg.NotReplayable):
        tg.record(not_recordable, wp, X, t)
    obj = DataParallel(not_recordable, data=(X, t), client=client, chunks=100)
    r = X @ wp - t
    v, g = obj.value_and_grad(wp)
    assert v == pytest.approx((r * r).sum(), rel=1e-12)
    np.testing.assert_allclose(g, 2 * X.T @ r, rtol=1e-12)
    obj.close()


@pytest.fixture
def client_without_stealing():
    # (on a loaded machine the scheduler's work stealing may move a chunk's task, and
    # with it the chunk, to the idler worker: the placement is measured without it)
    import dask
    with dask.config.set({"distributed.scheduler.work-stealing": False}):
        yield from _two_workers()


def test_data_is_sent_once(client_without_stealing):
    client = client_without_stealing
    rng = np.random.default_rng(4)
    X = rng.standard_normal((40000, 16))        # 5 MB of data ...
    t = rng.standard_normal(40000)
    w = rng.standard_normal(16)                 # ... and 128 bytes of parameters
    obj = DataParallel(least_squares, data=(X, t), client=client, chunks=10000)
    obj.value_and_grad(w)                       # (records the tapes)

    def sent(dask_worker):
        return dask_worker.transfer_outgoing_bytes_total
    before = sum(client.run(sent).values())
    with distributed.get_task_stream(client) as ts:
        for k in range(5):
            obj.value_and_grad(w + k)
    after = sum(client.run(sent).values())
    # between workers only the reductions' partial gradients move (16 numbers each)
    assert after - before < 5 * 3 * 4096, after - before
    names = [r["key"].split("-")[0] if isinstance(r["key"], str) else r["key"][0].split("-")[0] for r in ts.data]
    # one task per worker holding chunks (both, here), and the additions of their results
    holders = {obj._placement[i] for i in range(4)}
    assert len(holders) == 2 and len(obj._groups()) == 2
    assert names.count("_group_value_and_grad") == 5 * 2
    assert names.count("_add") == 5 * 1
    assert len(names) == 5 * 3          # no chunk recomputed or moved by a task
    actions = [s["action"] for r in ts.data if r["key"].startswith("_group") for s in r["startstops"]]
    assert "transfer" not in actions and actions.count("compute") == 5 * 2, actions
    # (a worker labels any gathering of a task's inputs that takes over 5 ms "disk-read",
    # spilled or not, as a loaded machine's pause can make it: what was spilled is counted)
    def spilled(dask_worker):
        return len(dask_worker.data.slow)           # (a SpillBuffer: its slow store is the disk)
    assert sum(client.run(spilled).values()) == 0
    obj.close()


def test_chunks_are_spread_over_the_workers(client):
    rng = np.random.default_rng(13)
    X, t = rng.standard_normal((6000, 4)), rng.standard_normal(6000)
    one = sorted(client.nthreads())[0]
    Xd, td = client.persist([da.from_array(X, chunks=(1000, 4)), da.from_array(t, chunks=1000)], workers=[one])
    distributed.wait([Xd, td])
    assert set(client.who_has(distributed.futures_of(Xd)).values()) == {(one,)}     # all on one worker
    obj = DataParallel(least_squares, data=(Xd, td), client=client)
    rows = {}
    for i, w in obj._placement.items():
        rows[w] = rows.get(w, 0) + obj._chunk_rows[i]
    assert sorted(rows.values()) == [3000, 3000]
    w = rng.standard_normal(4)
    v0, (g0,) = _single(least_squares, w, X, t, nparams=1)
    with distributed.get_task_stream(client) as ts:
        v, g = obj.value_and_grad(w)
    assert abs(v - v0) <= 1e-12 * v0 and _rel(g, g0) <= 1e-12
    assert len(ts.data) == 3 and all(s["action"] == "compute" for r in ts.data for s in r["startstops"]
                                     if str(r["key"]).startswith("_group"))
    obj.close()


def test_a_chunk_is_moved_to_one_worker_with_all_its_arrays(client):
    # X's chunks persisted on one worker, t's on the other: each chunk's t is copied
    # once to where its X is, so that a call moves no data between workers
    rng = np.random.default_rng(17)
    X, t = rng.standard_normal((4000, 16)), rng.standard_normal(4000)
    a, b = sorted(client.nthreads())
    Xd = client.persist(da.from_array(X, chunks=(1000, 16)), workers=[a])
    td = client.persist(da.from_array(t, chunks=1000), workers=[b])
    distributed.wait([Xd, td])
    obj = DataParallel(least_squares, data=(Xd, td), client=client, block_bytes=None)
    where = client.who_has([f for c in obj._chunks for f in c])
    for i, c in enumerate(obj._chunks):
        homes = [set(where[f.key]) for f in c]
        assert obj._placement[i] in homes[0] and obj._placement[i] in homes[1], (i, homes)
    w = rng.standard_normal(16)
    v0, (g0,) = _single(least_squares, w, X, t, nparams=1)
    v, g = obj.value_and_grad(w)

    def sent(dask_worker):
        return dask_worker.transfer_outgoing_bytes_total
    before = sum(client.run(sent).values())
    for k in range(3):
        v, g = obj.value_and_grad(w)
    assert abs(v - v0) <= 1e-12 * v0 and _rel(g, g0) <= 1e-12
    assert sum(client.run(sent).values()) - before < 3 * 3 * 4096      # (t's chunk alone is 8000 bytes)
    obj.close()


def test_loss_exception_surfaces_with_its_type_and_message(client):
    rng = np.random.default_rng(5)
    X, t = rng.standard_normal((520, 3)), rng.standard_normal(520)
    obj = DataParallel(fails_on_short_chunks, data=(X, t), client=client, chunks=200)
    with pytest.raises(ShortChunkError, match="^chunk of 120 rows$"):
        obj.value_and_grad(np.ones(3))
    obj.close()


def test_bad_input_errors_before_anything_is_sent(client):
    X, y, w, b = _problem(n=100, seed=6)
    with pytest.raises(ValueError, match="different numbers of rows: array 0 has 100, array 1 has 99"):
        DataParallel(logistic, data=(X, y[:99]), client=client)
    with pytest.raises(ValueError, match="chunked along axis 1 .* rechunk it with a.rechunk"):
        DataParallel(logistic, data=(da.from_array(X, chunks=(50, 2)), y), client=client)
    with pytest.raises(ValueError, match="reduction must be 'sum' or 'mean', got 'max'"):
        DataParallel(logistic, data=(X, y), client=client, reduction="max")
    with pytest.raises(ValueError, match="chunks must be a positive number of rows"):
        DataParallel(logistic, data=(X, y), client=client, chunks=0)
    obj = DataParallel(logistic, data=(X, y), client=client, chunks=50)
    with distributed.get_task_stream(client) as ts:
        with pytest.raises(RuntimeError, match="shape"):      # w of 3 elements for 4 columns: on the first rows
            obj.value_and_grad(np.ones(3), b)
        with pytest.raises(TypeError, match="floating-point"):
            obj.value_and_grad(np.array(["a"] * 4), b)
    assert len(ts.data) == 0                    # the bad calls sent no task
    with distributed.get_task_stream(client) as ts:
        assert obj.value_and_grad(w, b)[0] > 0                 # (fixes the parameters' shapes)
    assert len(ts.data) == 2 * len(obj._groups()) - 1
    with distributed.get_task_stream(client) as ts:
        with pytest.raises(ValueError, match=r"parameter 0 has shape \(5,\); the first call's had \(4,\)"):
            obj.value_and_grad(np.ones(5), b)
        with pytest.raises(TypeError, match="takes 2 parameters"):
            obj.value_and_grad(w)
    assert len(ts.data) == 0
    obj.close()


def test_scipy_objective_converges_to_the_single_process_optimum(client):
    from scipy.optimize import minimize
    X, y, w, b = _problem(n=2000, d=5, seed=7)
    obj = DataParallel(logistic, data=(X, y), client=client, chunks=600)
    tape = tg.record(logistic, w, b, X, y)

    def single(x):
        v, (gw, gb) = tape.value_and_grad(x[:5], x[5:].reshape(()), X, y, argnums=(0, 1))
        return v, np.concatenate([gw, np.reshape(gb, 1)])
    x0 = np.zeros(6)
    with pytest.raises(RuntimeError, match="needs the parameters' shapes"):
        obj.scipy_objective()
    f = obj.scipy_objective(np.zeros(5), np.zeros(()))
    v, g = f(x0)
    v1, g1 = single(x0)
    assert abs(v - v1) <= 1e-12 * v1 and _rel(g, g1) <= 1e-12
    got = minimize(f, x0, jac=True, method="L-BFGS-B", options={"gtol": 1e-10, "ftol": 1e-15})
    want = minimize(single, x0, jac=True, method="L-BFGS-B", options={"gtol": 1e-10, "ftol": 1e-15})
    assert got.success and want.success
    np.testing.assert_allclose(got.x, want.x, rtol=1e-7, atol=1e-9)
    assert abs(got.fun - want.fun) <= 1e-10 * want.fun
    assert np.max(np.abs(single(got.x)[1])) < 1e-5     # an optimum
    obj.close()


def test_current_client_is_used(client):
    X, y, w, b = _problem(n=200, seed=8)
    with client.as_current():
        obj = DataParallel(logistic, data=(X, y), chunks=100)
    assert obj.client is client and obj._own is None
    v0 = _single(logistic, w, b, X, y, nparams=2)[0]
    assert obj.value_and_grad(w, b)[0] == pytest.approx(v0, rel=1e-12)
    obj.close()


def _kill_one_worker(client):
    pids = client.run(os.getpid)
    addr, pid = sorted(pids.items())[0]
    os.kill(pid, signal.SIGKILL)
    return addr


def test_worker_killed_between_and_during_calls(client):
    rng = np.random.default_rng(9)
    X, t = rng.standard_normal((4000, 6)), rng.standard_normal(4000)
    w = rng.standard_normal(6)
    obj = DataParallel(least_squares, data=(X, t), client=client, chunks=700)
    first = obj.value_and_grad(w)
    v0, (g0,) = _single(least_squares, w, X, t, nparams=1)
    assert abs(first[0] - v0) <= 1e-12 * v0 and _rel(first[1], g0) <= 1e-12
    # between calls: its chunks are recomputed from their lineage, the result is the same
    _kill_one_worker(client)
    again = obj.value_and_grad(w)
    assert abs(again[0] - first[0]) <= 1e-12 * v0 and _rel(again[1], first[1]) <= 1e-12
    client.wait_for_workers(2, timeout=60)

    # during a call: each worker's first replay records (slow), and one worker dies meanwhile
    slow = DataParallel(slow_to_record, data=(X, t), client=client, chunks=700)
    box = {}
    th = threading.Thread(target=lambda: box.setdefault("r", slow.value_and_grad(w)))
    th.start()
    time.sleep(1.5)         # (past the client's own check of the first rows: the tasks are running)
    assert th.is_alive()
    _kill_one_worker(client)
    th.join(120)
    assert not th.is_alive() and "r" in box
    v, g = box["r"]
    assert abs(v - v0) <= 1e-12 * v0 and _rel(g, g0) <= 1e-12
    client.wait_for_workers(2, timeout=60)
    v2, g2 = slow.value_and_grad(w)
    assert abs(v2 - v) <= 1e-12 * v0 and _rel(g2, g) <= 1e-12
    obj.close()
    slow.close()


def test_starts_its_own_cluster_without_a_client(client, monkeypatch):
    from tapegrad import _dask_parallel as tdist

    def no_client():
        raise ValueError("No clients found")
    made = {}

    def small_cluster(**kw):
        made.update(kw)
        return distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                        dashboard_address=":0")
    monkeypatch.setattr(tdist, "default_client", no_client)
    monkeypatch.setattr(tdist, "LocalCluster", small_cluster)
    X, y, w, b = _problem(n=100, seed=10)
    obj = DataParallel(logistic, data=(X, y))
    assert made["n_workers"] == (os.cpu_count() or 1) and made["threads_per_worker"] == 1 and made["processes"]
    assert obj._own is not None and obj.client is not client
    assert obj.value_and_grad(w, b)[0] == pytest.approx(_single(logistic, w, b, X, y, nparams=2)[0], rel=1e-12)
    own_client, own_cluster = obj._own
    obj.close()
    assert own_client.status == "closed"
