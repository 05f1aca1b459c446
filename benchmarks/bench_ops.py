"""asv benchmarks of the eager path, per op family (``asv run --python=same``).

Each family records a graph and differentiates it (``time_``: record + backward;
``peakmem_``: the process's peak memory while doing so), parameterized over the
number of elements ``n`` and, where it means something, the graph length (how
many ops are chained).  ``Sweep`` times the reverse sweep alone: the graph is
recorded once in ``setup`` with ``retain_graph=True`` and only
``loss.backward(retain_graph=True)`` is timed.  ``TapeCost`` tracks what one op
adds to the tape: entries, bytes of the values it saves for backward, bytes of
entry and auxiliary storage.

Every ``setup`` makes one untimed call of what it times: the first call compiles
(or loads from Numba's cache) the kernels, which must never land inside a timing.
The largest sizes are skipped (NotImplementedError in ``setup``, shown as n/a)
where they would make the quick CI pass slow, e.g. 1,000,000 elements chained 64 deep.
"""
import numpy as np
import tapegrad as tg
from tapegrad import _jit

# the compiled kernels are what these time: loaded at once, small backward passes are
# not interpreted first (see tapegrad.autograd.engine)
_jit.load()

SIZES = [1, 256, 65_536, 1_000_000]

# asv's default is 60 s per benchmark, setup included: a setup that has to compile
# kernels (empty or invalidated Numba cache, slow machine) can take longer
timeout = 300
LENGTHS = [1, 64]


def _data(n, seed=0):
    return np.random.default_rng(seed).standard_normal(n)


def _skip_big(n, length):
    # 64 ops on 1e6 elements keep ~0.5 GB for backward and take seconds: not in the quick pass
    if n * length > 4_000_000:
        raise NotImplementedError("graph too large for this benchmark grid")


def _side(n):
    """A matrix shape with about ``n`` elements: (rows, cols)."""
    r = max(1, int(round(np.sqrt(n))))
    return r, max(1, n // r)


def _warm_up():
    """Load (or compile) every kernel family the suite uses, once, at import: asv's
    forkserver imports the suite before forking a process per benchmark, so each
    ``setup`` then finds them in memory instead of loading Numba's cache again.
    (Every ``setup`` still makes its own untimed call.)"""
    from .compare import chain, chain_inputs, hvp, hvp_inputs, mlp, mlp_inputs, rosen, rosen_inputs
    rng = np.random.default_rng(0)
    chain(tg, chain_inputs(rng, steps=3))
    mlp(tg, mlp_inputs(rng, batch=4, n_in=3, hidden=5, n_out=2))
    rosen(tg, rosen_inputs(rng, n=8))
    hvp(tg, hvp_inputs(rng, n=8))
    x = tg.tensor(_data(4).reshape(2, 2), requires_grad=True)
    w = tg.tensor(_data(4, 1).reshape(2, 2), requires_grad=True)
    ys = [tg.sin(x) * w + tg.cos(x) * 0.5, x.mean(dim=1), x.reshape(4), x.transpose(0, 1), x[:, :], x[[1, 0]],
          x @ w, x + 1.0, x - w]
    sum(y.sum() for y in ys).backward(retain_graph=True)


_warm_up()


# -- eager record + backward, per op family ---------------------------------------

class Unary:
    """Elementwise unary: ``y = tg.sin(y)`` chained ``length`` times, then sum + backward."""
    params = (SIZES, LENGTHS)
    param_names = ["n", "length"]

    def setup(self, n, length):
        _skip_big(n, length)
        self.x = tg.tensor(_data(n), requires_grad=True)
        self.run(n, length)

    def run(self, n, length):
        y = self.x
        for _ in range(length):
            y = tg.sin(y)
        y.sum().backward()

    def time_sin(self, n, length):
        self.run(n, length)

    def peakmem_sin(self, n, length):
        self.run(n, length)


class Binary:
    """Elementwise binary: ``y = y * w`` chained ``length`` times, then sum + backward."""
    params = (SIZES, LENGTHS)
    param_names = ["n", "length"]

    def setup(self, n, length):
        _skip_big(n, length)
        self.x = tg.tensor(_data(n), requires_grad=True)
        self.w = tg.tensor(_data(n, 1), requires_grad=True)
        self.run(n, length)

    def run(self, n, length):
        y, w = self.x, self.w
        for _ in range(length):
            y = y * w
        y.sum().backward()

    def time_mul(self, n, length):
        self.run(n, length)

    def peakmem_mul(self, n, length):
        self.run(n, length)


class MoreElementwise:
    """The second elementwise table (kernels made when a backward first meets one of its
    ops): ``lgamma(x) + hypot(x, w) + softplus(x)``, summed, record + backward."""
    params = [SIZES]
    param_names = ["n"]

    def setup(self, n):
        self.x = tg.tensor(np.abs(_data(n)) + 0.5, requires_grad=True)
        self.w = tg.tensor(_data(n, 1), requires_grad=True)
        self.run(n)

    def run(self, n):
        (tg.lgamma(self.x) + tg.hypot(self.x, self.w) + tg.nn.functional.softplus(self.x)).sum().backward()

    def time_lgamma_hypot_softplus(self, n):
        self.run(n)


class Reduce:
    """Reductions of an (r, c) matrix with ``n`` elements: ``sum()`` and ``mean(dim=1).sum()``."""
    params = (SIZES, ["sum", "mean_dim"])
    param_names = ["n", "op"]

    def setup(self, n, op):
        r, c = _side(n)
        self.x = tg.tensor(_data(r * c).reshape(r, c), requires_grad=True)
        self.f = (lambda x: x.sum()) if op == "sum" else (lambda x: x.mean(dim=1).sum())
        self.run(n, op)

    def run(self, n, op):
        self.f(self.x).backward()

    def time_reduce(self, n, op):
        self.run(n, op)

    def peakmem_reduce(self, n, op):
        self.run(n, op)


class Order:
    """Scans and order along the rows of an (r, c) matrix with ``n`` elements:
    ``sort``, ``topk`` (a tenth of a row), ``median``, ``cummax``, ``cumprod``, then
    sum + backward (ops/order.py's gathers; cumprod's kernel branch)."""
    params = (SIZES[:3], ["sort", "topk", "median", "cummax", "cumprod"])
    param_names = ["n", "op"]

    def setup(self, n, op):
        r, c = _side(n)
        self.x = tg.tensor(_data(r * c).reshape(r, c), requires_grad=True)
        k = max(1, c // 10)
        self.f = {
            "sort": lambda x: tg.sort(x, 1).values,
            "topk": lambda x: tg.topk(x, k, 1).values,
            "median": lambda x: tg.median(x, 1).values,
            "cummax": lambda x: tg.cummax(x, 1).values,
            "cumprod": lambda x: tg.cumprod(x, 1),
        }[op]
        self.run(n, op)

    def run(self, n, op):
        self.f(self.x).sum().backward()

    def time_order(self, n, op):
        self.run(n, op)

    def peakmem_order(self, n, op):
        self.run(n, op)


class Shape:
    """Shape ops on an (r, c) matrix: ``reshape``, ``transpose``, basic indexing (a
    slice) and advanced indexing (an index array), each ``length`` times, then sum + backward."""
    params = (SIZES[:3], ["reshape", "transpose", "slice", "take"], LENGTHS)
    param_names = ["n", "op", "length"]

    def setup(self, n, op, length):
        r, c = _side(n)
        self.x = tg.tensor(_data(r * c).reshape(r, c), requires_grad=True)
        rows = np.arange(r)[::-1].copy()
        self.f = {
            "reshape": lambda y: y.reshape(c, r),
            "transpose": lambda y: y.transpose(0, 1),
            "slice": lambda y: y[:, :],
            "take": lambda y: y[rows],
        }[op]
        self.run(n, op, length)

    def run(self, n, op, length):
        y = self.x
        f = self.f
        for _ in range(length):
            y = f(y)
        y.sum().backward()

    def time_shape(self, n, op, length):
        self.run(n, op, length)

    def peakmem_shape(self, n, op, length):
        self.run(n, op, length)


class Matmul:
    """Linear algebra: ``(a @ b).sum()`` of two square matrices with ``n`` elements each,
    then backward (three matrix products in all)."""
    params = SIZES
    param_names = ["n"]

    def setup(self, n):
        r, _ = _side(n)
        self.a = tg.tensor(_data(r * r).reshape(r, r), requires_grad=True)
        self.b = tg.tensor(_data(r * r, 1).reshape(r, r), requires_grad=True)
        self.run(n)

    def run(self, n):
        (self.a @ self.b).sum().backward()

    def time_matmul(self, n):
        self.run(n)

    def peakmem_matmul(self, n):
        self.run(n)


class Compose:
    """Ops composed of recorded ones (``ops/compose.py``) on an (r, c) matrix ``x`` with
    ``n`` elements: ``einsum("ij,kj,k->i", x, x, v)`` (a three-operand path), ``tensordot``
    of ``x`` with itself, a reflect pad of 2 on each side and ``repeat_interleave`` by 2
    along the rows, then sum + backward."""
    params = (SIZES[:3], ["einsum", "tensordot", "pad_reflect", "repeat_interleave"])
    param_names = ["n", "op"]

    def setup(self, n, op):
        r, c = _side(n)
        self.x = tg.tensor(_data(r * c).reshape(r, c), requires_grad=True)
        v = tg.tensor(_data(r, 1))
        if op == "pad_reflect" and c < 3:
            raise NotImplementedError("a reflect pad of 2 needs 3 columns")
        self.f = {
            "einsum": lambda x: tg.einsum("ij,kj,k->i", x, x, v),
            "tensordot": lambda x: tg.tensordot(x, x, ([1], [1])),
            "pad_reflect": lambda x: tg.nn.functional.pad(x, (2, 2), mode="reflect"),
            "repeat_interleave": lambda x: tg.repeat_interleave(x, 2, dim=0),
        }[op]
        self.run(n, op)

    def run(self, n, op):
        self.f(self.x).sum().backward()

    def time_compose(self, n, op):
        self.run(n, op)


class HostLinalg:
    """Host ops (tg.linalg): ``solve``, ``cholesky`` and ``eigh`` of symmetric positive
    definite ``r x r`` matrices, with elementwise ops around them, then backward (the
    compiled sweep stops at each host entry and runs its reverse in Python), ``length``
    such steps chained."""
    params = ([16, 256, 4096], LENGTHS)
    param_names = ["n", "length"]

    def setup(self, n, length):
        r, _ = _side(n)
        a = _data(r * r).reshape(r, r)
        self.s = tg.tensor(a @ a.T + r * np.eye(r), requires_grad=True)
        self.b = tg.tensor(_data(r, 1).reshape(r, 1), requires_grad=True)
        self.run(n, length)

    def run(self, n, length):
        x, total = self.b, 0.0
        for _ in range(length):
            x = tg.linalg.solve(self.s, tg.tanh(x))
            total = total + (tg.linalg.cholesky(self.s) * 0.5).sum() + tg.linalg.eigvalsh(self.s).sum()
        (total + x.sum()).backward()

    def time_host_linalg(self, n, length):
        self.run(n, length)


class Distributions:
    """``tg.distributions`` (compositions of recorded ops): the log-density of ``n`` values
    under a batch of ``n`` distributions (``Normal``, ``Gamma``; ``Categorical`` over 8
    classes; ``MultivariateNormal`` of event size 4, one covariance, ``n // 4`` vectors),
    then sum + backward to the parameters. ``validate_args=False``: the checks read values
    in Python and are timed apart (``validate``, a ``Normal`` with its default checks)."""
    params = (SIZES[:3], ["normal", "gamma", "categorical", "mvn", "validate"])
    param_names = ["n", "op"]

    def setup(self, n, op):
        from tapegrad import distributions as D
        a = tg.tensor(np.abs(_data(n)) + 0.5, requires_grad=True)
        b = tg.tensor(np.abs(_data(n, 1)) + 0.5, requires_grad=True)
        x = tg.tensor(np.abs(_data(n, 2)) + 0.1)
        off = dict(validate_args=False)
        if op == "categorical":
            logits = tg.tensor(_data(8 * max(1, n // 8)).reshape(-1, 8), requires_grad=True)
            k = tg.tensor(np.arange(logits.shape[0]) % 8)
            self.f = lambda: D.Categorical(logits=logits, **off).log_prob(k)
        elif op == "mvn":
            m = max(1, n // 4)
            c = np.eye(4) + 0.3
            loc = tg.tensor(_data(4), requires_grad=True)
            cov = tg.tensor(c, requires_grad=True)
            v = tg.tensor(_data(4 * m, 3).reshape(m, 4))
            self.f = lambda: D.MultivariateNormal(loc, cov, **off).log_prob(v)
        else:
            make = {"normal": lambda: D.Normal(a, b, **off), "gamma": lambda: D.Gamma(a, b, **off),
                    "validate": lambda: D.Normal(a, b)}[op]
            self.f = lambda: make().log_prob(x)
        self.run(n, op)

    def run(self, n, op):
        self.f().sum().backward()

    def time_distribution(self, n, op):
        self.run(n, op)


# -- the reverse sweep alone ------------------------------------------------------

class Sweep:
    """``loss.backward(retain_graph=True)`` of a graph recorded once in ``setup``: a
    ``y = sin(y) * w + cos(y) * 0.5`` recurrence ``length`` steps long (5 entries per step)."""
    params = (SIZES, [1, 64, 1024])
    param_names = ["n", "length"]

    def setup(self, n, length):
        _skip_big(n, length)
        x = tg.tensor(_data(n), requires_grad=True)
        w = tg.tensor(_data(n, 1), requires_grad=True)
        y = x
        for _ in range(length):
            y = tg.sin(y) * w + tg.cos(y) * 0.5
        self.loss = y.sum()
        self.loss.backward(retain_graph=True)    # compiles (or loads) the sweep; untimed

    def time_sweep(self, n, length):
        self.loss.backward(retain_graph=True)


# -- what one op costs on the tape ------------------------------------------------

_OPS = {
    "sin": lambda x, w: tg.sin(x),
    "mul": lambda x, w: x * w,
    "add_scalar": lambda x, w: x + 1.0,
    "sum": lambda x, w: x.sum(),
    "mean_dim": lambda x, w: x.mean(dim=1),
    "reshape": lambda x, w: x.reshape(-1),
    "transpose": lambda x, w: x.transpose(0, 1),
    "slice": lambda x, w: x[1:],
    "take": lambda x, w: x[[0, 0]],
    "matmul": lambda x, w: x @ w,
}


class TapeCost:
    """What one op adds to the tape when it is applied in the middle of a graph (to
    non-leaf (r, c) inputs ``u = x + w``, ``v = x - w`` with ``n`` elements): entries,
    bytes of the values it makes the tape keep for backward, entry bytes
    (``tg.core.tape.ESIZE`` each) and bytes of auxiliary parameters (shapes, indices)."""
    params = (list(_OPS), [256, 65_536])
    param_names = ["op", "n"]

    def setup(self, op, n):
        r, c = _side(n)
        x = tg.tensor(_data(r * c).reshape(r, c), requires_grad=True)
        w = tg.tensor(_data(r * c, 1).reshape(r, c), requires_grad=True)
        tg.core.tape.rotate()                # a fresh tape: only these entries are on it
        u, v = x + w, x - w
        T = u._tape
        before = _tape_stats(T)
        out = _OPS[op](u, v)
        if out._tape is not T:
            raise RuntimeError("the tape rotated while measuring")
        after = _tape_stats(T)
        self.cost = {k: after[k] - before[k] for k in after}
        out.sum().backward()            # the op's reverse runs (compiled here, untimed)

    def track_entries(self, op, n):
        return self.cost["entries"]
    track_entries.unit = "entries"

    def track_saved_bytes(self, op, n):
        return self.cost["saved_bytes"]
    track_saved_bytes.unit = "bytes"

    def track_entry_bytes(self, op, n):
        return self.cost["entry_bytes"]
    track_entry_bytes.unit = "bytes"

    def track_aux_bytes(self, op, n):
        return self.cost["aux_bytes"]
    track_aux_bytes.unit = "bytes"


def _tape_stats(T):
    seen, saved = set(), 0
    for v in T.vals:
        if v is not None and id(v) not in seen:
            seen.add(id(v))
            saved += v.nbytes
    return {"entries": T.n, "saved_bytes": saved, "entry_bytes": T.n * tg.core.tape.ESIZE, "aux_bytes": 8 * T.aux_len}


class LiveTape:
    """``tg.core.tape.memory_stats()`` after recording the sweep's recurrence (``length`` steps on
    256 elements) without calling backward: what a recorded graph holds."""
    params = [64, 1024]
    param_names = ["length"]

    def setup(self, length):
        tg.core.tape.rotate()
        x = tg.tensor(_data(256), requires_grad=True)
        w = tg.tensor(_data(256, 1), requires_grad=True)
        y = x
        for _ in range(length):
            y = tg.sin(y) * w + tg.cos(y) * 0.5
        self.y = y
        self.stats = tg.core.tape.memory_stats()

    def track_entries(self, length):
        return self.stats["entries"]
    track_entries.unit = "entries"

    def track_saved_bytes(self, length):
        return self.stats["saved_bytes"]
    track_saved_bytes.unit = "bytes"
