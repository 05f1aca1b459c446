"""asv benchmarks for tapegrad's forward+backward (``asv run --python=same``).

The workloads are the ones in compare.py, so asv's history and the torch
comparison measure the same code.  Every ``setup`` makes one untimed call:
the first call compiles Numba kernels, which must never land inside a timing.
"""
import numpy as np
import tapegrad as tg

from .compare import chain, chain_inputs, hvp, hvp_inputs, mlp, mlp_inputs, rosen, rosen_inputs


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
