"""asv benchmarks for tapegrad's forward+backward (``asv run --python=same``).

The workloads are the ones in compare.py, so asv's history and the torch
comparison measure the same code.  Every ``setup`` makes one untimed call:
the first call compiles Numba kernels, which must never land inside a timing.
"""
import numpy as np
import tapegrad as tg
from tapegrad import _jit

from .compare import (chain, chain_inputs, chargpt, chargpt_inputs, hessian_gp, hessian_gp_inputs, hvp, hvp_inputs,
                      lattice_inputs, lenet, lenet_inputs, lj, logreg, logreg_inputs, lstm, lstm_inputs, mlp, mlp_inputs,
                      rosen, rosen_inputs)

# asv's default is 60 s per benchmark, setup included: a setup that compiles kernels
# (empty or invalidated Numba cache) can take longer
timeout = 300

# the compiled kernels are what these time: loaded at once, small backward passes are
# not interpreted first (see tapegrad.autograd.engine); the first call still compiles
_jit.load()


def _inputs(make, **kw):
    return make(np.random.default_rng(0), **kw)


class Chain:
    def setup(self):
        self.inputs = _inputs(chain_inputs)
        chain(tg, self.inputs)

    def time_chain_backward(self):
        chain(tg, self.inputs)


class MLP:
    def setup(self):
        self.inputs = _inputs(mlp_inputs)
        mlp(tg, self.inputs)

    def time_mlp_backward(self):
        mlp(tg, self.inputs)


class Rosen:
    params = [1000, 1_000_000]
    param_names = ["n"]

    def setup(self, n):
        self.inputs = _inputs(rosen_inputs, n=n)
        rosen(tg, self.inputs)

    def time_rosen_backward(self, n):
        rosen(tg, self.inputs)

    def peakmem_rosen(self, n):
        rosen(tg, self.inputs)


class HVP:
    """Hessian-vector product by double backward (create_graph=True)."""
    params = [1000, 10_000]
    param_names = ["n"]

    def setup(self, n):
        self.inputs = _inputs(hvp_inputs, n=n)
        hvp(tg, self.inputs)

    def time_hvp(self, n):
        hvp(tg, self.inputs)


class HessianGP:
    """Dense Hessian of a Gaussian-process objective: host ops (slogdet, solve) in forward mode."""
    def setup(self):
        self.inputs = _inputs(hessian_gp_inputs)
        hessian_gp(tg, self.inputs)

    def time_hessian_gp(self):
        hessian_gp(tg, self.inputs)


class HessianSpectral:
    """Dense Hessians through the other host ops' forward-mode rules: an objective of
    eigenvalues and a determinant (eigh, det), and a spectral one (rfft, complex abs, irfft)."""
    def setup(self):
        rng = np.random.default_rng(0)
        M = rng.standard_normal((20, 20))
        self.A = tg.tensor(M + M.T)
        self.x = tg.tensor(rng.standard_normal(20) * 0.5)
        self.w = tg.tensor(rng.standard_normal(33))
        self.s = tg.tensor(rng.standard_normal(64))
        self.time_hessian_eigh_det()
        self.time_hessian_fft()

    def time_hessian_eigh_det(self):
        def f(x):
            L = tg.linalg.eigvalsh(self.A + tg.diag(x.sin()))
            return (L ** 4).sum() + tg.linalg.det(tg.eye(20) * 3 + tg.outer(x, x))
        tg.autograd.functional.hessian(f, self.x)

    def time_hessian_fft(self):
        def f(x):
            z = tg.fft.rfft(x * x.sin(), norm="ortho")
            return (z.abs() ** 3 * self.w).sum() + (tg.fft.irfft(z * z, n=64) ** 2).sum()
        tg.autograd.functional.hessian(f, self.s)


class CreateGraphHistory:
    """grad(create_graph=True) in a loop with no plain backward (which would start a new
    tape): each call resumes the one tape, which grows with the calls before it; a call
    should cost what its own graph does, not the history's."""
    def setup(self):
        self.x = np.random.default_rng(0).uniform(-2.0, 2.0, 10)
        for _ in range(2000):
            self.time_create_graph_grad()

    def time_create_graph_grad(self):
        x = tg.tensor(self.x, requires_grad=True)
        head = x[:-1]
        tg.autograd.grad((100 * (x[1:] - head ** 2) ** 2 + (1 - head) ** 2).sum(), x, create_graph=True)


class LennardJones:
    """384 atoms, all pairs by broadcasting (compare.py's lj)."""
    def setup(self):
        self.inputs = _inputs(lattice_inputs)
        lj(tg, self.inputs)

    def time_lj_backward(self):
        lj(tg, self.inputs)


class LogReg:
    """Logistic loss and L2, 200,000 x 32 (compare.py's logreg)."""
    def setup(self):
        self.inputs = _inputs(logreg_inputs)
        logreg(tg, self.inputs)

    def time_logreg_backward(self):
        logreg(tg, self.inputs)


class NN:
    """tg.nn models, forward + backward (compare.py's lenet, lstm, chargpt)."""
    params = [["lenet", "lstm", "chargpt"]]
    param_names = ["workload"]

    def setup(self, workload):
        make, self.fn = {"lenet": (lenet_inputs, lenet), "lstm": (lstm_inputs, lstm),
                         "chargpt": (chargpt_inputs, chargpt)}[workload]
        self.inputs = _inputs(make)
        self.fn(tg, self.inputs)

    def time_nn(self, workload):
        self.fn(tg, self.inputs)


class Torch:
    """The same workloads in PyTorch (float64, one thread), for reference next to
    tapegrad's in asv's tables.  Skipped (n/a) when torch is not installed."""
    params = [["chain", "mlp", "rosen", "hvp", "lj", "logreg", "lenet", "lstm", "chargpt"]]
    param_names = ["workload"]

    def setup(self, workload):
        try:
            import torch
        except ImportError:
            raise NotImplementedError("torch is not installed")
        torch.set_num_threads(1)
        from .compare import WORKLOADS
        wl = WORKLOADS[workload]
        self.inputs = _inputs(wl.make_inputs)     # compare.py's sizes
        self.fn = wl.torch_fn
        self.torch = torch
        self.fn(torch, self.inputs)

    def time_torch(self, workload):
        self.fn(self.torch, self.inputs)


class Replay:
    """The workloads as tg.compile'd functions, replayed: recording (and Numba
    compilation) happen in ``setup``; ``track_`` the cost of that first call."""
    params = [["chain", "mlp", "rosen", "lj", "logreg"]]
    param_names = ["workload"]
    timeout = 300

    def setup(self, workload):
        from .compare import WORKLOADS, _COMPILED
        wl = WORKLOADS[workload + "_replay"]
        self.inputs = _inputs(wl.make_inputs, **({"n": 100_000} if workload == "rosen" else {}))
        self.fn = wl.tapegrad_fn
        _COMPILED.pop(workload, None)
        self.fn(tg, self.inputs)                 # records the tape
        self.fn(tg, self.inputs)                 # compiles the replay's kernels

    def time_replay(self, workload):
        self.fn(tg, self.inputs)

    def track_replays(self, workload):
        """Replays in 10 calls (10: no call fell back to recording or eager execution)."""
        from .compare import _COMPILED
        before = _COMPILED[workload].stats.replays
        for _ in range(10):
            self.fn(tg, self.inputs)
        return _COMPILED[workload].stats.replays - before


class Fused:
    """tg.compile(fn, fuse=True), replayed through its fused loops:
    recording, the loops' compile and the check in ``setup``; ``track_`` whether it fused."""
    params = [["rosen", "lj", "logreg"]]
    param_names = ["workload"]
    timeout = 300

    def setup(self, workload):
        from .compare import WORKLOADS, _COMPILED
        name = workload + "_fused"
        wl = WORKLOADS[name]
        self.inputs = _inputs(wl.make_inputs, **({"n": 100_000} if workload == "rosen" else {}))
        self.fn, self.name = wl.tapegrad_fn, name
        _COMPILED.pop(name, None)
        for _ in range(4):      # records, then fuses at the first replay
            self.fn(tg, self.inputs)

    def time_fused(self, workload):
        self.fn(tg, self.inputs)

    def track_fused(self, workload):
        """1 when the recording replays through fused loops, else 0."""
        from .compare import _COMPILED
        return int(bool(_COMPILED[self.name].fusion()[0]["fused"]))


class Guards:
    """The check a replay of a tg.compile'd function runs first: the guards on what it reads
    from outside its arguments (5 globals and 2 attributes: compare.py's guarded_body)."""

    def setup(self):
        from .compare import guarded_body
        f = tg.compile(guarded_body)
        x = tg.tensor(np.linspace(-1.0, 1.0, 8))
        f(x)
        f(x)
        (R,) = next(iter(f.cache.values()))
        self.check, self.args = R.captures.check, (x,)

    def time_guard_check(self):
        self.check(self.args, {})

    def track_guarded_values(self):
        from .compare import guarded_body
        from tapegrad.replay.captured import discover
        return len(discover(guarded_body, (tg.ones(8),), {}))
