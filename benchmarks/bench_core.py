"""asv benchmarks for tapegrad's forward+backward (``asv run --python=same``).

The workloads are the ones in compare.py, so asv's history and the torch
comparison measure the same code.  Every ``setup`` makes one untimed call:
the first call compiles Numba kernels, which must never land inside a timing.
"""
import numpy as np
import tapegrad as tg
from tapegrad import _jit

from .compare import chain, chain_inputs, hvp, hvp_inputs, mlp, mlp_inputs, rosen, rosen_inputs

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


class Torch:
    """The same workloads in PyTorch (float64, one thread), for reference next to
    tapegrad's in asv's tables.  Skipped (n/a) when torch is not installed."""
    params = [["chain", "mlp", "rosen", "hvp"]]
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
    params = [["chain", "mlp", "rosen"]]
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
