"""Data-parallel ``value_and_grad`` of a recorded objective over a Dask cluster.

::

    from dask.distributed import Client
    from tapegrad.distributed import DataParallel
    obj = DataParallel(loss, data=(X, y), client=Client(), reduction="sum")
    value, (gw, gb) = obj.value_and_grad(w, b)          # NumPy in, NumPy out
    scipy.optimize.minimize(obj.scipy_objective(), x0, jac=True, method="L-BFGS-B")

``loss(*params, *data_chunk)`` is ordinary tapegrad code returning a scalar for one
chunk of rows.  The data (dask arrays chunked along axis 0, or NumPy arrays cut into
``chunks`` rows) is persisted on the workers once.  Each worker records the loss
(``tg.record``) once per chunk shape and keeps the tape; a call ships the parameters
to one task per chunk, which replays its tape with ``argnums`` set to the
parameters (the data gets no gradient), and the chunks' values and gradients are
added pairwise on the cluster: one value and one gradient per parameter come back.

A worker lost between or during calls costs time only: Dask recomputes the chunks
it held from their lineage (the persisted graph) and reruns the call's tasks.  An
exception raised by the loss on a worker is raised by the call in the client.

This module imports Dask; ``import tapegrad`` does not import this module.
``tapegrad.distributed`` (torch.distributed's answers for a single process) hands
its names out on first use.
"""
import operator
import os
import threading
import uuid

import numpy as np

try:
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster, default_client, futures_of, wait
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError as e:        # pragma: no cover - the optional extra is missing
    raise ImportError("tapegrad.distributed needs Dask: pip install 'tapegrad[dask]' "
                      "(dask[distributed,array])") from e

__all__ = ["DataParallel"]

REDUCTIONS = ("sum", "mean")
# Dask starts worker processes with MALLOC_TRIM_THRESHOLD_=65536, which makes glibc
# hand freed memory back at once and map it again at the next call: a replay's
# temporaries then cost page faults, several times the arithmetic once a large
# transfer went through the worker.  The LocalCluster DataParallel starts keeps
# glibc's default (docs/distributed.md says how to do the same on a cluster).
LOCAL_CLUSTER_CONFIG = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}

# A worker evaluates its chunks in blocks of rows of about this much data: the
# forward pass leaves a block in the cache for the reverse pass (X @ w, then X.T @ g),
# which halves the memory traffic of a loss linear in the data.
BLOCK_BYTES = 4 << 20

# -- on the workers ---------------------------------------------------------------------
# token -> loss function, set by _LossPlugin on every worker (and on workers that join later)
_LOSSES = {}
# (token, thread, shapes and dtypes of the parameters and the chunk) -> tg.RecordedTape or None (eager)
_TAPES = {}
_TAPES_LOCK = threading.Lock()


class _LossPlugin(WorkerPlugin):
    """Puts the loss function on each worker once, under the objective's token."""

    idempotent = False

    def __init__(self, token, loss):
        self.token = token
        self.loss = loss
        self.name = "tapegrad-loss-" + token

    def setup(self, worker):
        _LOSSES[self.token] = self.loss

    def teardown(self, worker):
        _LOSSES.pop(self.token, None)
        with _TAPES_LOCK:
            for k in [k for k in _TAPES if k[0] == self.token]:
                del _TAPES[k]


def _signature(arrays):
    return tuple((a.shape, a.dtype.str) for a in arrays)


def _eager_value_and_grad(loss, params, chunk):
    import tapegrad as tg
    ps = [tg.tensor(p, requires_grad=True) for p in params]
    out = loss(*ps, *[tg.tensor(c) for c in chunk])
    if not isinstance(out, tg.Tensor) or out.numel() != 1:
        raise RuntimeError("the loss must return a tensor of one element, got %r" % (out,))
    out.backward()
    grads = [np.zeros_like(p) if t.grad is None else t.grad.numpy().copy() for p, t in zip(params, ps)]
    return float(out.item()), grads


def _chunk_value_and_grad(token, params, chunk):
    """One chunk's (value, [gradient per parameter])."""
    import tapegrad as tg
    loss = _LOSSES.get(token)
    if loss is None:
        raise RuntimeError("the loss of this DataParallel objective is not registered on this worker "
                           "(was the objective closed?)")
    chunk = [np.asarray(c) for c in chunk]
    key = (token, threading.get_ident(), _signature(params), _signature(chunk))
    argnums = tuple(range(len(params)))
    with _TAPES_LOCK:
        tape = _TAPES.get(key, False)
    if tape is False:
        try:
            tape = tg.record(loss, *params, *chunk)
        except tg.NotReplayable:
            tape = None                 # (the loss runs eagerly at every call)
        with _TAPES_LOCK:
            _TAPES[key] = tape
    if tape is None:
        return _eager_value_and_grad(loss, params, chunk)
    try:
        value, grads = tape.value_and_grad(*params, *chunk, argnums=argnums)
    except tg.TapeDivergence:           # another path through the loss: record it again
        tape = tg.record(loss, *params, *chunk)
        with _TAPES_LOCK:
            _TAPES[key] = tape
        value, grads = tape.value_and_grad(*params, *chunk, argnums=argnums)
    return value, [np.array(g, copy=True) for g in grads]      # (not views of a replay's memory)


def _block_rows(chunk, block_bytes):
    """Rows per block of ``chunk`` (its data arrays) for about ``block_bytes`` of data."""
    rows = chunk[0].shape[0]
    if not block_bytes:
        return rows
    per_row = sum(c.nbytes // max(c.shape[0], 1) for c in chunk) or 1
    return max(1, min(rows, block_bytes // per_row))


def _group_value_and_grad(token, params, layout, total_rows, block_bytes, *chunks):
    """The sum of (value, gradients) over the chunks a worker holds, and where they
    are.  ``layout`` = [(chunk index, number of data arrays)]; ``total_rows``: the
    rows of all the data for a mean (each block weighted by its rows), else None.
    Each chunk is evaluated in blocks of rows of about ``block_bytes`` of data, so
    that the reverse pass finds them still in the cache."""
    from distributed import get_worker
    try:
        here = get_worker().address
    except ValueError:
        here = None
    total, grads, at, placed = 0.0, None, 0, {}
    for i, k in layout:
        chunk = [np.asarray(c) for c in chunks[at:at + k]]
        at += k
        rows = chunk[0].shape[0]
        step = _block_rows(chunk, block_bytes)
        for a in range(0, rows, step):
            block = [c[a:a + step] for c in chunk] if step < rows else chunk
            value, g = _chunk_value_and_grad(token, params, block)
            if total_rows is not None:
                weight = block[0].shape[0] / total_rows
                value, g = value * weight, [x * weight for x in g]
            total += value
            grads = g if grads is None else [x + y for x, y in zip(grads, g)]
        placed[i] = here
    return total, grads, placed


def _identity(x):
    return x


def _add(a, b):
    placed = dict(a[2])
    placed.update(b[2])
    return a[0] + b[0], [operator.add(x, y) for x, y in zip(a[1], b[1])], placed


# -- in the client ------------------------------------------------------------------------
class DataParallel:
    """``loss`` summed (``reduction="sum"``) or averaged over rows (``"mean"``)
    across the chunks of ``data``, evaluated with its gradient on a Dask cluster.

    ``data``: one array or a tuple of arrays with the same number of rows, each a
    dask array chunked along axis 0 only, or a NumPy array (cut into ``chunks``
    rows; by default one chunk per worker thread).  ``client``: a
    ``distributed.Client``; ``None`` uses the current client, or starts a
    ``LocalCluster`` of one single-threaded process per core (closed by
    ``close()``).  ``loss(*params, *chunk)`` returns a scalar tensor for one chunk;
    with ``"mean"`` it is the mean over the chunk's rows, and the chunks are
    weighted by their rows.  Each worker evaluates its chunks in blocks of about
    ``block_bytes`` of data (``None``: whole chunks), one tape per block shape, so
    the loss must be a sum (or a mean) over rows, as data parallelism assumes.
    """

    def __init__(self, loss, data, client=None, reduction="sum", chunks=None, block_bytes=BLOCK_BYTES):
        if not callable(loss):
            raise TypeError("loss must be callable, got %s" % type(loss).__name__)
        if reduction not in REDUCTIONS:
            raise ValueError("reduction must be 'sum' or 'mean', got %r" % (reduction,))
        data = tuple(data) if isinstance(data, (tuple, list)) else (data,)
        if not data:
            raise ValueError("data must hold at least one array")
        if chunks is not None and (not isinstance(chunks, (int, np.integer)) or isinstance(chunks, bool)
                                   or chunks < 1):
            raise ValueError("chunks must be a positive number of rows, got %r" % (chunks,))
        if block_bytes is not None and (not isinstance(block_bytes, (int, np.integer)) or block_bytes < 1):
            raise ValueError("block_bytes must be a positive number of bytes or None, got %r" % (block_bytes,))
        self.loss = loss
        self.reduction = reduction
        self.block_bytes = None if block_bytes is None else int(block_bytes)
        self._own = None
        arrays, rows = self._check_data(data)
        self.rows = rows
        self._param_meta = None         # [(shape, dtype)] of the first call's parameters
        self._token = uuid.uuid4().hex
        if client is None:
            try:
                client = default_client()
            except ValueError:
                n = os.cpu_count() or 1
                with dask.config.set(LOCAL_CLUSTER_CONFIG):
                    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True)
                client = Client(cluster)
                self._own = (client, cluster)
        self.client = client
        row_chunks = self._row_chunks(arrays, rows, chunks)
        darrays = []
        for a in arrays:
            if isinstance(a, da.Array):
                if a.chunks[0] != row_chunks:
                    a = a.rechunk({0: row_chunks})
            else:
                a = da.from_array(a, chunks=(row_chunks,) + tuple((s,) for s in a.shape[1:]))
            darrays.append(a)
        self._head = [np.asarray(a[:min(2, rows)]) if not isinstance(a, da.Array) else None for a in arrays]
        # the loss on every worker, present and future, once
        client.register_plugin(_LossPlugin(self._token, loss))
        # the data: persisted once, then referred to by its chunks' futures
        self._data = client.persist(darrays)
        wait(self._data)            # (on the workers before the first call)
        self._chunk_rows = row_chunks
        self._chunks = []
        for a in self._data:
            by_key = {f.key: f for f in futures_of(a)}
            self._chunks.append([by_key[k] for k in _first_axis_keys(a)])
        self._chunks = list(zip(*self._chunks))         # per chunk: a future per data array
        # which worker holds each chunk (a call's tasks go there; each call's result
        # says where its chunks were, so a lost worker's chunks are found again)
        where = client.who_has([f for c in self._chunks for f in c])
        row_bytes = [a.dtype.itemsize * int(np.prod(a.shape[1:])) for a in self._data]
        self._placement = {i: self._colocate(i, where, row_bytes) for i in range(len(self._chunks))}
        self._threads = dict(client.nthreads())
        self._balance()
        if any(h is None for h in self._head):
            got = client.compute([a[:min(2, rows)] for a in self._data], sync=True)
            self._head = [np.asarray(h) for h in got]

    # -- input checks -------------------------------------------------------------
    @staticmethod
    def _check_data(data):
        arrays = []
        rows = None
        for i, a in enumerate(data):
            if not isinstance(a, da.Array):
                if not isinstance(a, np.ndarray):
                    try:
                        a = np.asarray(a)
                    except Exception:
                        raise TypeError("data array %d is a %s, not an array" % (i, type(a).__name__)) from None
                if a.dtype.kind not in "biuf":
                    raise TypeError("data array %d has dtype %s; data must be numeric" % (i, a.dtype))
            if a.ndim < 1:
                raise ValueError("data array %d is 0-dimensional; data arrays have rows (axis 0)" % i)
            if isinstance(a, da.Array):
                if any(np.isnan(c) for cs in a.chunks for c in cs):
                    raise ValueError("data array %d has unknown chunk sizes; call compute_chunk_sizes() first" % i)
                for ax, cs in enumerate(a.chunks[1:], 1):
                    if len(cs) != 1:
                        raise ValueError("data array %d is chunked along axis %d (chunks %s); DataParallel splits "
                                         "rows only: rechunk it with a.rechunk({%d: -1})" % (i, ax, cs, ax))
            n = a.shape[0]
            if rows is None:
                rows = n
            elif n != rows:
                raise ValueError("data arrays have different numbers of rows: array 0 has %d, array %d has %d"
                                 % (rows, i, n))
            arrays.append(a)
        if rows == 0:
            raise ValueError("data has no rows")
        return arrays, rows

    def _row_chunks(self, arrays, rows, chunks):
        if chunks is not None:
            n = int(chunks)
        else:
            for a in arrays:
                if isinstance(a, da.Array):
                    return tuple(int(c) for c in a.chunks[0])
            threads = sum(self.client.nthreads().values()) or 1
            n = -(-rows // threads)
        return tuple(min(n, rows - s) for s in range(0, rows, n))

    def _check_params(self, params):
        if not params:
            raise TypeError("value_and_grad needs at least one parameter")
        arrays = []
        for i, p in enumerate(params):
            a = np.asarray(p._data if hasattr(p, "_data") else p)
            if a.dtype.kind in "biu":
                a = a.astype(np.float64)
            if a.dtype.kind != "f":
                raise TypeError("parameter %d has dtype %s; parameters must be floating-point arrays" % (i, a.dtype))
            arrays.append(a)
        meta = [(a.shape, a.dtype) for a in arrays]
        if self._param_meta is None:
            # the first call: the loss runs here on the first rows, so that a parameter
            # of the wrong shape (or a loss that fails on any chunk) errors before any task
            _eager_value_and_grad(self.loss, arrays, self._head)
            self._param_meta = meta
        elif meta != self._param_meta:
            if len(meta) != len(self._param_meta):
                raise TypeError("value_and_grad takes %d parameters (as at its first call), %d given"
                                % (len(self._param_meta), len(meta)))
            for i, (m, m0) in enumerate(zip(meta, self._param_meta)):
                if m[0] != m0[0]:
                    raise ValueError("parameter %d has shape %s; the first call's had %s" % (i, m[0], m0[0]))
            arrays = [a.astype(m0[1]) for a, m0 in zip(arrays, self._param_meta)]
        return arrays

    # -- evaluation -------------------------------------------------------------------
    @property
    def num_chunks(self):
        return len(self._chunks)

    def value_and_grad(self, *params):
        """(value, gradient) for one parameter, (value, tuple of gradients) for several:
        the loss over all rows as ``reduction`` combines the chunks."""
        arrays = self._check_params(params)
        client = self.client
        parts = []
        for worker, layout, futures in self._groups():
            parts.append(client.submit(_group_value_and_grad, self._token, arrays, layout,
                                       self.rows if self.reduction == "mean" else None, self.block_bytes, *futures,
                                       pure=False,
                                       workers=None if worker is None else [worker], allow_other_workers=True))
        while len(parts) > 1:           # a tree reduction on the cluster
            nxt = [client.submit(_add, parts[j], parts[j + 1], pure=False) for j in range(0, len(parts) - 1, 2)]
            if len(parts) % 2:
                nxt.append(parts[-1])
            parts = nxt
        value, grads, placed = parts[0].result()
        self._placement.update(placed)
        grads = [np.asarray(g) for g in grads]
        return float(value), (grads[0] if len(grads) == 1 else tuple(grads))

    def gradient(self, *params):
        return self.value_and_grad(*params)[1]

    def _colocate(self, i, where, row_bytes):
        """The worker that holds most of chunk ``i``'s bytes; the chunk's other arrays
        are copied there once.  Dask persists each array's chunks on its own, so chunk
        ``i`` of ``X`` and of ``y`` may sit on different workers, and every call would
        fetch one of them again (a fetched replica is dropped after its task)."""
        held = {}
        for f, nb in zip(self._chunks[i], row_bytes):
            for w in where.get(f.key, ()):
                held[w] = held.get(w, 0) + nb
        if not held:
            return None
        home = max(sorted(held), key=lambda w: held[w])
        if any(home not in where.get(f.key, ()) for f in self._chunks[i]):
            self._chunks[i] = tuple(f if home in where.get(f.key, ()) else
                                    self.client.submit(_identity, f, pure=False, workers=[home],
                                                       allow_other_workers=True)
                                    for f in self._chunks[i])
            wait(list(self._chunks[i]))
        return home

    def _balance(self):
        """Spread the chunks over the workers by rows (per thread): Dask places a
        collection's chunks where they were computed, which may leave a worker with
        most of them.  A chunk moved is a copy of the persisted one, made once on its
        new worker (its lineage: the original, so a lost copy is made again)."""
        threads = {w: n for w, n in self._threads.items() if n > 0}
        if len(threads) < 2:
            return
        share = self.rows / sum(threads.values())
        load = {w: 0 for w in threads}
        for i, w in self._placement.items():
            if w in load:
                load[w] += self._chunk_rows[i]
        moves = {}
        for i in sorted(self._placement, key=lambda i: -self._chunk_rows[i]):
            src = self._placement[i]
            n = self._chunk_rows[i]
            excess = load[src] - share * threads[src] if src in load else n
            dst = min(threads, key=lambda w: load[w] - share * threads[w])
            room = share * threads[dst] - load[dst]
            if dst != src and excess > n / 2 and room > n / 2:
                moves[i] = dst
                if src in load:
                    load[src] -= n
                load[dst] += n
        if not moves:
            return
        for i, dst in moves.items():
            self._chunks[i] = tuple(self.client.submit(_identity, f, pure=False, workers=[dst],
                                                       allow_other_workers=True) for f in self._chunks[i])
            self._placement[i] = dst
        wait([f for i in moves for f in self._chunks[i]])

    def _groups(self):
        """The call's tasks: per worker, its chunks in as many groups as it has threads
        (one task per chunk would let Dask's work stealing move chunks between workers)."""
        by_worker = {}
        for i in range(len(self._chunks)):
            by_worker.setdefault(self._placement.get(i), []).append(i)
        out = []
        for worker, idx in sorted(by_worker.items(), key=lambda kv: str(kv[0])):
            k = max(1, min(len(idx), self._threads.get(worker, 1) if worker is not None else 1))
            for j in range(k):
                part = idx[j::k]
                layout = [(i, len(self._chunks[i])) for i in part]
                out.append((worker, layout, [f for i in part for f in self._chunks[i]]))
        return out

    def scipy_objective(self, *like):
        """``f(x) -> (value, gradient)`` of a flat float64 ``x`` for
        ``scipy.optimize.minimize(..., jac=True)``: ``x`` is split into the shapes of
        ``like`` (example parameters), or of the last call's parameters."""
        if like:
            shapes = [np.shape(p) for p in like]
        elif self._param_meta is not None:
            shapes = [m[0] for m in self._param_meta]
        else:
            raise RuntimeError("scipy_objective() needs the parameters' shapes: pass example parameters "
                               "(obj.scipy_objective(w0, b0)) or call value_and_grad once")
        sizes = [int(np.prod(s)) for s in shapes]
        total = sum(sizes)

        def objective(x):
            x = np.asarray(x, np.float64).reshape(-1)
            if x.size != total:
                raise ValueError("x has %d elements; the parameters %s have %d" % (x.size, shapes, total))
            params, at = [], 0
            for s, k in zip(shapes, sizes):
                params.append(x[at:at + k].reshape(s))
                at += k
            value, grads = self.value_and_grad(*params)
            grads = grads if isinstance(grads, tuple) else (grads,)
            return value, np.concatenate([np.asarray(g, np.float64).reshape(-1) for g in grads])
        return objective

    # -- resources ----------------------------------------------------------------------
    def close(self):
        """Drop the persisted data and the workers' tapes; shut down the cluster this
        objective started (a client passed in stays open)."""
        try:
            if self.client.status == "running":
                self.client.unregister_worker_plugin(_LossPlugin(self._token, None).name)
        except Exception:
            pass
        self._data = self._chunks = None
        if self._own is not None:
            client, cluster = self._own
            self._own = None
            client.close()
            cluster.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<tapegrad.distributed.DataParallel of %s over %d rows in %d chunks, reduction=%r>" % (
            getattr(self.loss, "__name__", self.loss), self.rows, self.num_chunks, self.reduction)


def _first_axis_keys(a):
    """The keys of a dask array's chunks along axis 0 (it has one chunk along the others)."""
    keys = a.__dask_keys__()
    out = []
    for k in keys:
        while isinstance(k, list):
            if len(k) != 1:
                raise ValueError("a data array is chunked along more than its rows")
            k = k[0]
        out.append(k)
    return out

