"""Time value-and-gradient of tapegrad against PyTorch on the same workloads.

    python benchmarks/compare.py [--repeat N] [--warmup N] [--only chain,mlp,rosen,hvp] [--json PATH]

Every workload builds its graph from scratch and calls ``backward()`` once per
repetition.  Both libraries run in float64 on one thread, so the arithmetic is the
same; the table shows median milliseconds, the tapegrad/torch ratio and whether it
meets the workload's target.  Without torch only tapegrad's times are shown.

The eager workloads (and the fused ones, and the replayed lj and logreg) are also
timed, in the same alternating loop, as a hand-written value and gradient (the
derivative worked out by hand in NumPy, or in Python floats for the chain of single
numbers: the limit an automatic method approaches) and, when JAX is installed, as
``jax.jit(jax.value_and_grad(...))`` in steady state (its compile time is left out),
and for rosen, lj and logreg as a hand-written Numba loop (forward and reverse in one
pass where the math allows, fastmath off: the limit a tape compiler approaches;
compiled at the untimed check call).  Their values and gradients are checked against
tapegrad's first, and the table gives tapegrad's time as a multiple of each.
``--json PATH`` writes every time with the commit, date, machine and versions;
``benchmarks/plot.py`` draws it.

To add a workload, write ``make_inputs(rng) -> dict of numpy arrays`` and
``fn(lib, inputs) -> (loss, leaves)`` and register them in ``WORKLOADS``.  ``lib``
is ``tapegrad`` or ``torch``: the two share the PyTorch spelling, so one function
usually serves both; pass two different functions where they must differ.
"""
import os

if __name__ == "__main__":
    # One thread everywhere (torch is pinned in main()).  BLAS and Numba read these
    # at import, so they must be set before numpy is imported below.
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                 "NUMBA_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import argparse
import gc
import importlib
import json
import math
import platform
import statistics
import subprocess
import threading
from datetime import datetime, timezone
import sys
from dataclasses import dataclass
from time import perf_counter
from typing import Callable

import numpy as np

# Names here avoid asv's prefixes (time_, peakmem_, mem_, track_, timeraw_):
# asv imports every module in benchmarks/, and bench_core.py reuses this one.


@dataclass(frozen=True)
class Workload:
    make_inputs: Callable      # (np.random.Generator) -> dict of numpy arrays
    tapegrad_fn: Callable      # (lib, inputs) -> (loss, leaves)
    torch_fn: Callable
    target: float              # largest acceptable tapegrad/torch median ratio
    limit_fn: Callable = None  # (None, inputs) -> (loss array, gradient arrays), written by hand
    jax_fn: Callable = None    # (jax, inputs) -> a jitted () -> (loss, gradients)
    numba_fn: Callable = None  # (numba, inputs) -> (loss, gradients) by a hand-written Numba loop


# --- workloads ---------------------------------------------------------------

def chain_inputs(rng, steps=500):
    return {"y0": rng.standard_normal(1), "w": rng.standard_normal(1), "steps": steps}


def chain(lib, inp):
    """Long chain of tiny ops: measures per-op overhead, not arithmetic."""
    y0 = lib.tensor(inp["y0"], requires_grad=True)
    w = lib.tensor(inp["w"], requires_grad=True)
    y = y0
    for _ in range(inp["steps"]):
        y = y.sin() * w + y.cos() * 0.5
    loss = y.sum()
    loss.backward()
    return loss, [y0, w]


def mlp_inputs(rng, batch=64, n_in=64, hidden=128, n_out=10):
    return {
        "x": rng.standard_normal((batch, n_in)),
        "labels": rng.integers(0, n_out, batch),
        "rows": np.arange(batch),
        "W1": rng.standard_normal((n_in, hidden)) / np.sqrt(n_in),
        "b1": np.zeros(hidden),
        "W2": rng.standard_normal((hidden, n_out)) / np.sqrt(hidden),
        "b2": np.zeros(n_out),
    }


def mlp(lib, inp):
    """64->128->10 ReLU MLP with mean cross-entropy over class-index labels."""
    params = [lib.tensor(inp[k], requires_grad=True) for k in ("W1", "b1", "W2", "b2")]
    W1, b1, W2, b2 = params
    x = lib.tensor(inp["x"])
    logits = (x @ W1 + b1).relu() @ W2 + b2
    loss = -logits.log_softmax(1)[inp["rows"], inp["labels"]].mean()
    loss.backward()
    return loss, params


def rosen_inputs(rng, n=1_000_000):
    return {"x": rng.uniform(-2.0, 2.0, n)}


def rosen(lib, inp):
    """Rosenbrock on a long vector: a few big elementwise ops, memory bound."""
    x = lib.tensor(inp["x"], requires_grad=True)
    head = x[:-1]
    loss = (100 * (x[1:] - head ** 2) ** 2 + (1 - head) ** 2).sum()
    loss.backward()
    return loss, [x]


def rk4_inputs(rng, steps=1200):
    return {"p": np.array([9.81, 0.1]) + 0.01 * rng.standard_normal(2), "y0": np.array([1.0, 0.0]), "steps": steps}


def _rk4_body_for(lib):
    """The RK4 loss with ``lib``'s stack (one function object per library: tg.compile
    records it once)."""
    def body(p, y0, steps, dt=0.01):
        def f(y):
            return lib.stack([y[1], -p[0] * y[0].sin() - p[1] * y[1]])
        y, loss = y0, 0.0
        for _ in range(steps):
            k1 = f(y)
            k2 = f(y + 0.5 * dt * k1)
            k3 = f(y + 0.5 * dt * k2)
            k4 = f(y + dt * k3)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            loss = loss + (y * y).sum()
        return loss
    return body


_RK4_BODIES = {}


def _rk4_body(lib):
    b = _RK4_BODIES.get(lib.__name__)
    if b is None:
        b = _RK4_BODIES[lib.__name__] = _rk4_body_for(lib)
    return b


def rk4(lib, inp):
    """RK4 integration of a damped pendulum (a 2-vector ODE), 1,200 steps: 72,000 ops on
    two-element tensors (stack, indexing, sin, arithmetic), differentiated in its 2 parameters."""
    p = lib.tensor(inp["p"], requires_grad=True)
    loss = _rk4_body(lib)(p, lib.tensor(inp["y0"]), inp["steps"])
    loss.backward()
    return loss, [p]


def rk4_replay(lib, inp):
    p = lib.tensor(inp["p"], requires_grad=True)
    loss = _replayed(lib, "rk4", _rk4_body(lib))(p, lib.tensor(inp["y0"]), inp["steps"])
    loss.backward()
    return loss, [p]


def hvp_inputs(rng, n=10_000):
    return {"x": rng.uniform(-2.0, 2.0, n), "v": rng.standard_normal(n)}


def hvp(lib, inp):
    """Hessian-vector product of Rosenbrock by double backward (create_graph=True):
    x.grad ends up holding H v."""
    x = lib.tensor(inp["x"], requires_grad=True)
    v = lib.tensor(inp["v"])
    head = x[:-1]
    loss = (100 * (x[1:] - head ** 2) ** 2 + (1 - head) ** 2).sum()
    g, = lib.autograd.grad(loss, x, create_graph=True)
    (g * v).sum().backward()
    return loss, [x]


# --- higher order through tapegrad.autograd.functional (torch.autograd.functional,
# torch.func.jvp for the chain); results are handed back as ``.grad`` of a holder.

class _Result:
    def __init__(self, value):
        self.grad = value


def _rosen_loss(x):
    head = x[:-1]
    return (100 * (x[1:] - head ** 2) ** 2 + (1 - head) ** 2).sum()


def hvp_functional(lib, inp):
    """functional.hvp of Rosenbrock, 10^4 elements."""
    y, hv = lib.autograd.functional.hvp(_rosen_loss, lib.tensor(inp["x"]), lib.tensor(inp["v"]))
    return y, [_Result(hv)]


def hessian_inputs(rng, m=300, n=100):
    return {"A": rng.standard_normal((m, n)) / np.sqrt(n), "x": rng.standard_normal(n)}


def hessian(lib, inp):
    """Dense Hessian of sum(softplus(A x)) + x.x / 2, A 300 x 100 (PyTorch: vectorize=True)."""
    A = lib.tensor(inp["A"])

    def f(x):
        return lib.nn.functional.softplus(A @ x).sum() + 0.5 * (x * x).sum()
    x = lib.tensor(inp["x"])
    kw = {} if lib.__name__ == "tapegrad" else {"vectorize": True}
    return f(x), [_Result(lib.autograd.functional.hessian(f, x, **kw))]


def hessian_limit(_, inp):
    A, x = inp["A"], inp["x"]
    u = A @ x
    s = 1.0 / (1.0 + np.exp(-u))
    loss = np.logaddexp(0.0, u).sum() + 0.5 * x @ x
    return np.array(loss), [(A.T * (s * (1 - s))) @ A + np.eye(x.size)]


def hessian_gp_inputs(rng, m=30, n=20):
    return {"A": rng.standard_normal((m, n)), "y": rng.standard_normal(m), "x": 0.1 * rng.standard_normal(n)}


def hessian_gp(lib, inp):
    """Dense Hessian of a Gaussian-process objective in 20 log-scales, logdet(K) + y K^-1 y with
    K = A diag(e^x) A^T + I, 30 x 30: host ops (slogdet, solve) on the tape."""
    A, y = lib.tensor(inp["A"]), lib.tensor(inp["y"])

    def f(x):
        K = (A * x.exp()) @ A.T + lib.eye(A.shape[0], dtype=x.dtype)
        return lib.linalg.slogdet(K)[1] + y @ lib.linalg.solve(K, y)
    x = lib.tensor(inp["x"])
    kw = {} if lib.__name__ == "tapegrad" else {"vectorize": True}
    return f(x), [_Result(lib.autograd.functional.hessian(f, x, **kw))]


def hessian_gp_limit(_, inp):
    """By hand: with B = A^T K^-1 A, c = A^T K^-1 y, e = e^x, dK/dx_i = e_i a_i a_i^T,
    H = diag(e (diag B - c^2)) - E (B o B) E + 2 E (c c^T o B) E."""
    A, y, x = inp["A"], inp["y"], inp["x"]
    e = np.exp(x)
    K = (A * e) @ A.T + np.eye(A.shape[0])
    Ki = np.linalg.inv(K)
    B, c = A.T @ Ki @ A, A.T @ (Ki @ y)
    loss = np.linalg.slogdet(K)[1] + y @ Ki @ y
    H = np.diag(e * (np.diag(B) - c * c)) + np.outer(e, e) * (2 * np.outer(c, c) * B - B * B)
    return np.array(loss), [H]


def hvp_softplus_inputs(rng):
    inp = hessian_inputs(rng)
    inp["v"] = rng.standard_normal(inp["x"].size)
    return inp


def hvp_softplus(lib, inp):
    """functional.hvp of the softplus objective (a matrix product between elementwise ops)."""
    A = lib.tensor(inp["A"])

    def f(x):
        return lib.nn.functional.softplus(A @ x).sum() + 0.5 * (x * x).sum()
    y, hv = lib.autograd.functional.hvp(f, lib.tensor(inp["x"]), lib.tensor(inp["v"]))
    return y, [_Result(hv)]


def hvp_softplus_limit(_, inp):
    A, x, v = inp["A"], inp["x"], inp["v"]
    u = A @ x
    s = 1.0 / (1.0 + np.exp(-u))
    loss = np.logaddexp(0.0, u).sum() + 0.5 * x @ x
    return np.array(loss), [A.T @ (s * (1 - s) * (A @ v)) + v]


def jacobian_inputs(rng, n=50):
    return {"W": rng.standard_normal((n, n)) / np.sqrt(n), "x": rng.standard_normal(n)}


def _jacobian_map(lib, W):
    return lambda x: lib.tanh(W @ lib.sin(x)) * x + lib.exp(x)


def jacobian(lib, inp):
    """Jacobian of a 50 -> 50 map of elementwise ops and a matrix product (PyTorch: vectorize=True)."""
    f = _jacobian_map(lib, lib.tensor(inp["W"]))
    x = lib.tensor(inp["x"])
    kw = {} if lib.__name__ == "tapegrad" else {"vectorize": True}
    return f(x).sum(), [_Result(lib.autograd.functional.jacobian(f, x, **kw))]


def jacobian_limit(_, inp):
    W, x = inp["W"], inp["x"]
    t = np.tanh(W @ np.sin(x))
    J = (x * (1 - t * t))[:, None] * W * np.cos(x)[None, :] + np.diag(t + np.exp(x))
    return np.array((t * x + np.exp(x)).sum()), [J]


def _chain_map(lib, inp):
    w = lib.tensor(inp["w"])

    def f(y):
        for _ in range(inp["steps"]):
            y = lib.sin(y) * w + lib.cos(y) * 0.5
        return y
    return f


def jvp_chain(lib, inp):
    """Forward mode through the chain (torch.func.jvp for PyTorch)."""
    f = _chain_map(lib, inp)
    y0, t0 = lib.tensor(inp["y0"]), lib.tensor(np.ones(1))
    if lib.__name__ == "tapegrad":
        y, t = lib.autograd.functional.jvp(f, y0, t0)
    else:
        y, t = lib.func.jvp(f, (y0,), (t0,))
    return y.sum(), [_Result(t)]


def jvp_chain_limit(_, inp):
    sin, cos = math.sin, math.cos
    y, w, t = float(inp["y0"][0]), float(inp["w"][0]), 1.0
    for _ in range(inp["steps"]):
        s, c = sin(y), cos(y)
        y, t = s * w + c * 0.5, (c * w - s * 0.5) * t
    return np.array(y), [np.array([t])]


# --- replayed tapes (tg.compile): the function body is recorded at the first,
# untimed call and replayed afterwards; torch runs the same body eagerly.

_COMPILED = {}


def _replayed(lib, name, body, fuse=None):
    """``body`` itself for torch, its tg.compile'd version (made once) for tapegrad,
    with tg.compile's default fusion ("auto") unless ``fuse`` is given."""
    if lib.__name__ != "tapegrad":
        return body
    f = _COMPILED.get(name)
    if f is None:
        f = _COMPILED[name] = lib.compile(body) if fuse is None else lib.compile(body, fuse=fuse)
    return f


def _compiled_for(workload):
    """The tg.compile'd function a workload replays (None: it replays none)."""
    return _COMPILED.get(workload[:-len("_replay")] if workload.endswith("_replay") else workload)


_UNDECIDED = ("compiling in the background", "not replayed often enough yet")


def _settle(workload, fn, lib, inputs, timeout=120.0):
    """Call ``fn`` until fuse="auto" has decided for every recording of the workload
    (compiled in the background and switched over, or kept unfused): the timed calls
    then see the steady state."""
    compiled = _compiled_for(workload)
    deadline = perf_counter() + timeout
    while (compiled is not None and perf_counter() < deadline
           and any(d.get("why") in _UNDECIDED for d in compiled.fusion())):
        fn(lib, inputs)
    # second derivatives: a tape structure walked twice compiles its tangent program in the
    # background (autograd/tangent_program.py); wait for it, then call once more
    programs = getattr(getattr(lib, "autograd", None), "tangent_program", None)
    if programs is not None and any(t.name == "tapegrad-tangent" for t in threading.enumerate()):
        programs.wait(timeout)
        fn(lib, inputs)


def _chain_body(y0, w, steps):
    y = y0
    for _ in range(steps):
        y = y.sin() * w + y.cos() * 0.5
    return y.sum()


def chain_replay(lib, inp):
    y0 = lib.tensor(inp["y0"], requires_grad=True)
    w = lib.tensor(inp["w"], requires_grad=True)
    loss = _replayed(lib, "chain", _chain_body)(y0, w, inp["steps"])
    loss.backward()
    return loss, [y0, w]


def _mlp_body(x, W1, b1, W2, b2, rows, labels):
    logits = (x @ W1 + b1).relu() @ W2 + b2
    return -logits.log_softmax(1)[rows, labels].mean()


def mlp_replay(lib, inp):
    params = [lib.tensor(inp[k], requires_grad=True) for k in ("W1", "b1", "W2", "b2")]
    rows, labels = inp["rows"], inp["labels"]
    if lib.__name__ != "tapegrad":
        rows, labels = lib.as_tensor(rows), lib.as_tensor(labels)
    loss = _replayed(lib, "mlp", _mlp_body)(lib.tensor(inp["x"]), *params, rows, labels)
    loss.backward()
    return loss, params


def _rosen_body(x):
    head = x[:-1]
    return (100 * (x[1:] - head ** 2) ** 2 + (1 - head) ** 2).sum()


def rosen_replay(lib, inp):
    x = lib.tensor(inp["x"], requires_grad=True)
    loss = _replayed(lib, "rosen", _rosen_body)(x)
    loss.backward()
    return loss, [x]


def lattice_inputs(rng, shape=(8, 8, 6), spacing=1.1, noise=0.05):
    """384 atoms on a slightly perturbed cubic lattice (and the identity to mask i == j)."""
    g = np.stack(np.meshgrid(*[np.arange(n) for n in shape], indexing="ij"), -1).reshape(-1, 3) * spacing
    pos = g + noise * rng.standard_normal(g.shape)
    return {"pos": pos, "eye": np.eye(len(pos))}


def _lj_body(pos, eye):
    diff = pos[:, None, :] - pos[None, :, :]
    r2 = (diff * diff).sum(-1) + eye
    i6 = r2 ** -3
    return 0.5 * (4 * (i6 * i6 - i6) * (1 - eye)).sum()


def lj(lib, inp):
    """Lennard-Jones energy and forces, all pairs by broadcasting: elementwise over
    n x n x 3, a partial sum, a power."""
    pos = lib.tensor(inp["pos"], requires_grad=True)
    loss = _lj_body(pos, lib.tensor(inp["eye"]))
    loss.backward()
    return loss, [pos]


def lj_replay(lib, inp):
    pos = lib.tensor(inp["pos"], requires_grad=True)
    loss = _replayed(lib, "lj", _lj_body)(pos, lib.tensor(inp["eye"]))
    loss.backward()
    return loss, [pos]


def lj_fused(lib, inp):
    pos = lib.tensor(inp["pos"], requires_grad=True)
    loss = _replayed(lib, "lj_fused", _lj_body, fuse=True)(pos, lib.tensor(inp["eye"]))
    loss.backward()
    return loss, [pos]


def logreg_inputs(rng, n=200_000, d=32):
    return {"X": rng.standard_normal((n, d)), "y": np.sign(rng.standard_normal(n)),
            "w": 0.1 * rng.standard_normal(d)}


def _logreg_body(w, X, y):
    return (-y * (X @ w)).exp().log1p().mean() + 0.5e-3 * (w * w).sum()


def logreg(lib, inp):
    """Logistic loss with L2 on 200,000 x 32: one matrix-vector product each way,
    exp and log1p over 200,000."""
    w = lib.tensor(inp["w"], requires_grad=True)
    loss = _logreg_body(w, lib.tensor(inp["X"]), lib.tensor(inp["y"]))
    loss.backward()
    return loss, [w]


def logreg_replay(lib, inp):
    w = lib.tensor(inp["w"], requires_grad=True)
    loss = _replayed(lib, "logreg", _logreg_body)(w, lib.tensor(inp["X"]), lib.tensor(inp["y"]))
    loss.backward()
    return loss, [w]


def logreg_fused(lib, inp):
    """logreg_replay with fuse=True: the elementwise entries in fused loops, the
    matrix products calls between them (compiled at the first replay, within the
    warmup calls), kept even where "auto" would find them slower."""
    w = lib.tensor(inp["w"], requires_grad=True)
    loss = _replayed(lib, "logreg_fused", _logreg_body, fuse=True)(w, lib.tensor(inp["X"]), lib.tensor(inp["y"]))
    loss.backward()
    return loss, [w]


def rosen_fused(lib, inp):
    """rosen_replay with fuse=True: the tape compiled into one fused loop (its compile
    at the first replay, within the warmup calls)."""
    x = lib.tensor(inp["x"], requires_grad=True)
    loss = _replayed(lib, "rosen_fused", _rosen_body, fuse=True)(x)
    loss.backward()
    return loss, [x]


# --- hand-written value and gradient: the limit --------------------------------

def chain_limit(_, inp):
    """The chain in Python floats, its reverse written out (what a tape of single
    numbers can at best reduce to in Python)."""
    sin, cos = math.sin, math.cos
    y, w = float(inp["y0"][0]), float(inp["w"][0])
    ys = []
    for _ in range(inp["steps"]):
        ys.append(y)
        y = sin(y) * w + cos(y) * 0.5
    gy, gw = 1.0, 0.0
    for yk in reversed(ys):
        s, c = sin(yk), cos(yk)
        gw += gy * s
        gy *= c * w - s * 0.5
    return np.array(y), [np.array([gy]), np.array([gw])]


def mlp_limit(_, inp):
    x, W1, b1, W2, b2 = (inp[k] for k in ("x", "W1", "b1", "W2", "b2"))
    h = x @ W1 + b1
    r = np.maximum(h, 0.0)
    z = r @ W2 + b2
    z = z - z.max(1, keepdims=True)
    e = np.exp(z)
    s = e.sum(1, keepdims=True)
    rows, labels = inp["rows"], inp["labels"]
    loss = -(z[rows, labels] - np.log(s[:, 0])).mean()
    dz = e / s
    dz[rows, labels] -= 1.0
    dz /= len(rows)
    dr = dz @ W2.T
    dh = dr * (h > 0)
    return np.array(loss), [x.T @ dh, dh.sum(0), r.T @ dz, dz.sum(0)]


def rosen_limit(_, inp):
    x = inp["x"]
    head = x[:-1]
    d = x[1:] - head * head
    loss = (100 * d * d + (1 - head) ** 2).sum()
    g = np.zeros_like(x)
    g[:-1] = -400 * head * d - 2 * (1 - head)
    g[1:] += 200 * d
    return np.array(loss), [g]


def lj_limit(_, inp):
    pos, eye = inp["pos"], inp["eye"]
    diff = pos[:, None, :] - pos[None, :, :]
    r2 = np.einsum("ijk,ijk->ij", diff, diff) + eye
    i2 = 1.0 / r2
    i6 = i2 * i2 * i2
    off = 1.0 - eye
    loss = 2.0 * ((i6 * i6 - i6) * off).sum()
    # dE/dr2 = 2 * (-6 i6^2 + 3 i6) / r2, and dr2/dpos_i = 2 diff_ij, from both (i, j) and (j, i)
    c = 2.0 * (-6.0 * i6 * i6 + 3.0 * i6) * i2 * off
    g = 4.0 * np.einsum("ij,ijk->ik", c, diff)
    return np.array(loss), [g]


def logreg_limit(_, inp):
    X, y, w = inp["X"], inp["y"], inp["w"]
    m = -y * (X @ w)
    e = np.exp(m)
    loss = np.log1p(e).mean() + 0.5e-3 * (w @ w)
    dm = e / (1.0 + e) / len(y)
    return np.array(loss), [X.T @ (-y * dm) + 1e-3 * w]


def hvp_limit(_, inp):
    """H v from Rosenbrock's Hessian written out (tridiagonal)."""
    x, v = inp["x"], inp["v"]
    head = x[:-1]
    d = x[1:] - head * head
    loss = (100 * d * d + (1 - head) ** 2).sum()
    diag = np.zeros_like(x)
    diag[:-1] = 1200 * head * head - 400 * x[1:] + 2
    diag[1:] += 200
    hv = diag * v
    hv[:-1] -= 400 * head * v[1:]
    hv[1:] -= 400 * head * v[:-1]
    return np.array(loss), [hv]


# --- JAX: jax.jit of value_and_grad, built once per workload (compiled at the
# first, untimed call) -------------------------------------------------------------

_JAX = {}


# --- hand-written Numba value and gradient: one loop forward and back -------------
_NUMBA = {}


def _numba_jitted(name, build):
    """``build(numba)`` compiled once (outside the timed calls), then called on the inputs."""
    def fn(numba, inp):
        f = _NUMBA.get(name)
        if f is None:
            f = _NUMBA[name] = build(numba)
        return f(inp)
    return fn


def _numba_rosen(numba):
    @numba.njit(cache=False, fastmath=False)
    def vg(x):
        g = np.zeros_like(x)
        loss = 0.0
        for i in range(x.size - 1):
            h = x[i]
            d = x[i + 1] - h * h
            loss += 100.0 * d * d + (1.0 - h) * (1.0 - h)
            g[i] += -400.0 * h * d - 2.0 * (1.0 - h)
            g[i + 1] += 200.0 * d
        return loss, g
    return lambda inp: (lambda r: (np.array(r[0]), [r[1]]))(vg(inp["x"]))


def _numba_lj(numba):
    @numba.njit(cache=False, fastmath=False)
    def vg(pos):
        n = pos.shape[0]
        g = np.zeros_like(pos)
        loss = 0.0
        for i in range(n):
            for j in range(i + 1, n):
                dx = pos[i, 0] - pos[j, 0]
                dy = pos[i, 1] - pos[j, 1]
                dz = pos[i, 2] - pos[j, 2]
                i2 = 1.0 / (dx * dx + dy * dy + dz * dz)
                i6 = i2 * i2 * i2
                loss += 4.0 * (i6 * i6 - i6)
                c = 4.0 * (-12.0 * i6 * i6 + 6.0 * i6) * i2      # dE/dr * 1/r, per pair
                g[i, 0] += c * dx
                g[i, 1] += c * dy
                g[i, 2] += c * dz
                g[j, 0] -= c * dx
                g[j, 1] -= c * dy
                g[j, 2] -= c * dz
        return loss, g
    return lambda inp: (lambda r: (np.array(r[0]), [r[1]]))(vg(inp["pos"]))


def _numba_logreg(numba):
    @numba.njit(cache=False, fastmath=False)
    def vg(X, y, w):
        n, d = X.shape
        g = 1e-3 * w
        loss = 0.0
        for i in range(n):
            z = 0.0
            for k in range(d):
                z += X[i, k] * w[k]
            m = -y[i] * z
            e = np.exp(m)
            loss += np.log1p(e)
            dz = -y[i] * e / (1.0 + e) / n
            for k in range(d):
                g[k] += dz * X[i, k]
        return loss / n + 0.5e-3 * (w @ w), g
    return lambda inp: (lambda r: (np.array(r[0]), [r[1]]))(vg(inp["X"], inp["y"], inp["w"]))


def _jax_jitted(name, build):
    def fn(jax, inp):
        f = _JAX.get(name)
        if f is None:
            f = _JAX[name] = build(jax, inp)
        return f()
    return fn


def _jax_chain(jax, inp):
    jnp = jax.numpy

    def loss(y0, w):
        y = y0
        for _ in range(inp["steps"]):
            y = jnp.sin(y) * w + jnp.cos(y) * 0.5
        return y.sum()
    f = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    return lambda: jax.block_until_ready(f(inp["y0"], inp["w"]))


def _jax_mlp(jax, inp):
    jnp = jax.numpy

    def loss(W1, b1, W2, b2, x, rows, labels):
        logits = jnp.maximum(x @ W1 + b1, 0.0) @ W2 + b2
        return -jax.nn.log_softmax(logits, axis=1)[rows, labels].mean()
    f = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3)))
    args = [inp[k] for k in ("W1", "b1", "W2", "b2", "x", "rows", "labels")]
    return lambda: jax.block_until_ready(f(*args))


def _jax_rosen_loss(jnp):
    def loss(x):
        head = x[:-1]
        return (100 * (x[1:] - head ** 2) ** 2 + (1 - head) ** 2).sum()
    return loss


def _jax_rosen(jax, inp):
    f = jax.jit(jax.value_and_grad(_jax_rosen_loss(jax.numpy)))
    return lambda: jax.block_until_ready(f(inp["x"]))


def _jax_lj(jax, inp):
    eye = inp["eye"]

    def loss(pos):
        diff = pos[:, None, :] - pos[None, :, :]
        r2 = (diff * diff).sum(-1) + eye
        i6 = r2 ** -3
        return 0.5 * (4 * (i6 * i6 - i6) * (1 - eye)).sum()
    f = jax.jit(jax.value_and_grad(loss))
    return lambda: jax.block_until_ready(f(inp["pos"]))


def _jax_logreg(jax, inp):
    jnp = jax.numpy
    X, y = inp["X"], inp["y"]

    def loss(w):
        return jnp.log1p(jnp.exp(-y * (X @ w))).mean() + 0.5e-3 * (w * w).sum()
    f = jax.jit(jax.value_and_grad(loss))
    return lambda: jax.block_until_ready(f(inp["w"]))


def _jax_hessian(jax, inp):
    jnp = jax.numpy
    A = inp["A"]

    def f(x):
        return jnp.logaddexp(0.0, A @ x).sum() + 0.5 * x @ x
    h = jax.jit(lambda x: (f(x), jax.hessian(f)(x)))
    return lambda: jax.block_until_ready(h(inp["x"]))


def _jax_jacobian(jax, inp):
    jnp = jax.numpy
    W = inp["W"]

    def f(x):
        return jnp.tanh(W @ jnp.sin(x)) * x + jnp.exp(x)
    j = jax.jit(lambda x: (f(x).sum(), jax.jacrev(f)(x)))
    return lambda: jax.block_until_ready(j(inp["x"]))


def _jax_jvp_chain(jax, inp):
    jnp = jax.numpy

    def f(y):
        for _ in range(inp["steps"]):
            y = jnp.sin(y) * inp["w"] + jnp.cos(y) * 0.5
        return y
    def value_and_jvp(y):
        out, t = jax.jvp(f, (y,), (jnp.ones(1),))
        return out.sum(), t
    j = jax.jit(value_and_jvp)
    return lambda: jax.block_until_ready(j(inp["y0"]))


def _jax_hvp_softplus(jax, inp):
    jnp = jax.numpy
    A = inp["A"]

    def loss(x):
        return jax.nn.softplus(A @ x).sum() + 0.5 * x @ x

    def value_and_hvp(x, v):
        return loss(x), jax.jvp(jax.grad(loss), (x,), (v,))[1]
    f = jax.jit(value_and_hvp)
    return lambda: jax.block_until_ready(f(inp["x"], inp["v"]))


def _jax_hvp(jax, inp):
    loss = _jax_rosen_loss(jax.numpy)

    def value_and_hvp(x, v):
        return loss(x), jax.jvp(jax.grad(loss), (x,), (v,))[1]
    f = jax.jit(value_and_hvp)
    return lambda: jax.block_until_ready(f(inp["x"], inp["v"]))


# --- nn workloads: a model built once per library (the same weights), forward + backward per call ------
_MODELS = {}


def _model(lib, name, build, inp):
    """The model ``build(lib)`` for this library, made once, with the weights of ``inp``."""
    key = (lib.__name__, name)
    m = _MODELS.get(key)
    if m is None:
        m = build(lib)
        if lib.__name__ == "torch":
            m = m.double()
        with lib.no_grad():
            for (pname, p), w in zip(m.named_parameters(), inp["weights"]):
                p.copy_(lib.tensor(w))
        _MODELS[key] = m
    for p in m.parameters():
        p.grad = None
    return m


def _weights(build, rng):
    """Weights for ``build``'s parameters, drawn from tapegrad's model's initialisation."""
    import tapegrad
    tapegrad.manual_seed(int(rng.integers(1 << 31)))
    return [p.detach().numpy().copy() for p in build(tapegrad).parameters()]


def _lenet(lib):
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 12 * 12, 10))


def lenet_inputs(rng, batch=32):
    return {"x": rng.standard_normal((batch, 1, 28, 28)), "y": rng.integers(0, 10, batch),
            "weights": _weights(_lenet, rng)}


def lenet(lib, inp):
    """A LeNet-style convolutional net: two 3x3 convolutions (16, 32 channels), max-pool, linear;
    cross-entropy on a batch of 32 28x28 images."""
    m = _model(lib, "lenet", _lenet, inp)
    loss = lib.nn.functional.cross_entropy(m(lib.tensor(inp["x"])), lib.as_tensor(inp["y"]))
    loss.backward()
    return loss, list(m.parameters())


def _lstm(lib):
    nn = lib.nn
    return nn.ModuleDict({"lstm": nn.LSTM(32, 128), "head": nn.Linear(128, 1)})


def lstm_inputs(rng, seq=50, batch=32):
    return {"x": rng.standard_normal((seq, batch, 32)), "weights": _weights(_lstm, rng)}


def lstm(lib, inp):
    """A 1-layer LSTM (hidden 128) over a sequence of 50 steps, batch 32; the mean square of a
    linear read-out of its outputs."""
    m = _model(lib, "lstm", _lstm, inp)
    out, _ = m["lstm"](lib.tensor(inp["x"]))
    loss = (m["head"](out) ** 2).mean()
    loss.backward()
    return loss, list(m.parameters())


def _chargpt(lib, vocab=65, block=64, width=128, heads=4, layers=4):
    """nanoGPT's model at the size of its character example: pre-norm blocks of causal
    self-attention (F.scaled_dot_product_attention) and a GELU MLP, tied embedding."""
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.c_attn, self.c_proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.c_fc, self.mlp_proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
            self.gelu = nn.GELU()

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(width, dim=2)
            q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(block, width)
            self.h = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(width)
            self.lm_head = nn.Linear(width, vocab, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(lib.arange(idx.shape[1]))
            for blk in self.h:
                x = blk(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
    return GPT()


def chargpt_inputs(rng, batch=16, block=64):
    return {"idx": rng.integers(0, 65, (batch, block)), "targets": rng.integers(0, 65, (batch, block)),
            "weights": _weights(_chargpt, rng)}


def chargpt(lib, inp):
    """nanoGPT's character model (4 layers, 4 heads, width 128, block 64) on a batch of 16."""
    m = _model(lib, "chargpt", _chargpt, inp)
    loss = m(lib.as_tensor(inp["idx"]), lib.as_tensor(inp["targets"]))
    loss.backward()
    return loss, list(m.parameters())


def lenet_replay(lib, inp):
    """``lenet``'s forward and loss ``tg.compile``d (the model's parameters captured)."""
    m = _model(lib, "lenet", _lenet, inp)
    step = _replayed(lib, "lenet", lambda x, y: lib.nn.functional.cross_entropy(m(x), y))
    loss = step(lib.tensor(inp["x"]), lib.as_tensor(inp["y"]))
    loss.backward()
    return loss, list(m.parameters())


def lstm_replay(lib, inp):
    m = _model(lib, "lstm", _lstm, inp)
    step = _replayed(lib, "lstm", lambda x: (m["head"](m["lstm"](x)[0]) ** 2).mean())
    loss = step(lib.tensor(inp["x"]))
    loss.backward()
    return loss, list(m.parameters())


def chargpt_replay(lib, inp):
    m = _model(lib, "chargpt", _chargpt, inp)
    step = _replayed(lib, "chargpt", lambda idx, targets: m(idx, targets))
    loss = step(lib.as_tensor(inp["idx"]), lib.as_tensor(inp["targets"]))
    loss.backward()
    return loss, list(m.parameters())


WORKLOADS = {
    "chain": Workload(chain_inputs, chain, chain, target=0.15,   # (issue 6; issue 2 asked for 0.25)
                      limit_fn=chain_limit, jax_fn=_jax_jitted("chain", _jax_chain)),
    "mlp": Workload(mlp_inputs, mlp, mlp, target=1.0,
                    limit_fn=mlp_limit, jax_fn=_jax_jitted("mlp", _jax_mlp)),
    "rosen": Workload(rosen_inputs, rosen, rosen, target=1.0,
                      limit_fn=rosen_limit, jax_fn=_jax_jitted("rosen", _jax_rosen),
                      numba_fn=_numba_jitted("rosen", _numba_rosen)),
    "lj": Workload(lattice_inputs, lj, lj, target=1.0,        # (issue 20, item 6)
                   limit_fn=lj_limit, jax_fn=_jax_jitted("lj", _jax_lj), numba_fn=_numba_jitted("lj", _numba_lj)),
    "logreg": Workload(logreg_inputs, logreg, logreg, target=1.0,
                       limit_fn=logreg_limit, jax_fn=_jax_jitted("logreg", _jax_logreg),
                       numba_fn=_numba_jitted("logreg", _numba_logreg)),
    "rk4": Workload(rk4_inputs, rk4, rk4, target=1.0),     # (issue 44: tg.compile must never stall on it)
    "hvp": Workload(hvp_inputs, hvp, hvp, target=0.5,       # (issue 19: the double-backward idiom)
                    limit_fn=hvp_limit, jax_fn=_jax_jitted("hvp", _jax_hvp)),
    "hvp_functional": Workload(hvp_inputs, hvp_functional, hvp_functional, target=0.3,
                               limit_fn=hvp_limit, jax_fn=_jax_jitted("hvp", _jax_hvp)),
    # (no issue sets this row's target: 0.5 is the hessian row's, on the same objective)
    "hvp_softplus": Workload(hvp_softplus_inputs, hvp_softplus, hvp_softplus, target=0.5,
                             limit_fn=hvp_softplus_limit, jax_fn=_jax_jitted("hvp_softplus", _jax_hvp_softplus)),
    "hessian": Workload(hessian_inputs, hessian, hessian, target=0.5,
                        limit_fn=hessian_limit, jax_fn=_jax_jitted("hessian", _jax_hessian)),
    "hessian_gp": Workload(hessian_gp_inputs, hessian_gp, hessian_gp, target=1.0, limit_fn=hessian_gp_limit),
    "jacobian": Workload(jacobian_inputs, jacobian, jacobian, target=0.5,
                         limit_fn=jacobian_limit, jax_fn=_jax_jitted("jacobian", _jax_jacobian)),
    "jvp_chain": Workload(chain_inputs, jvp_chain, jvp_chain, target=0.1,
                          limit_fn=jvp_chain_limit, jax_fn=_jax_jitted("jvp_chain", _jax_jvp_chain)),
    "chain_replay": Workload(chain_inputs, chain_replay, chain_replay, target=0.01),
    "mlp_replay": Workload(mlp_inputs, mlp_replay, mlp_replay, target=0.7),
    "rk4_replay": Workload(rk4_inputs, rk4_replay, rk4_replay, target=0.2),
    "rosen_replay": Workload(rosen_inputs, rosen_replay, rosen_replay, target=0.3,     # (issue 20)
                             limit_fn=rosen_limit, jax_fn=_jax_jitted("rosen", _jax_rosen),
                             numba_fn=_numba_jitted("rosen", _numba_rosen)),
    "rosen_fused": Workload(rosen_inputs, rosen_fused, rosen_fused, target=0.3,     # (issue 20)
                            limit_fn=rosen_limit, jax_fn=_jax_jitted("rosen", _jax_rosen),
                            numba_fn=_numba_jitted("rosen", _numba_rosen)),
    "lj_replay": Workload(lattice_inputs, lj_replay, lj_replay, target=0.2,       # (and <= 1.5x jax.jit)
                          limit_fn=lj_limit, jax_fn=_jax_jitted("lj", _jax_lj), numba_fn=_numba_jitted("lj", _numba_lj)),
    "lj_fused": Workload(lattice_inputs, lj_fused, lj_fused, target=0.2,
                         limit_fn=lj_limit, jax_fn=_jax_jitted("lj", _jax_lj), numba_fn=_numba_jitted("lj", _numba_lj)),
    "logreg_replay": Workload(logreg_inputs, logreg_replay, logreg_replay, target=0.6,
                              limit_fn=logreg_limit, jax_fn=_jax_jitted("logreg", _jax_logreg),
                              numba_fn=_numba_jitted("logreg", _numba_logreg)),
    "logreg_fused": Workload(logreg_inputs, logreg_fused, logreg_fused, target=0.6,
                             limit_fn=logreg_limit, jax_fn=_jax_jitted("logreg", _jax_logreg),
                             numba_fn=_numba_jitted("logreg", _numba_logreg)),
    "lenet": Workload(lenet_inputs, lenet, lenet, target=1.0),          # (issue 47)
    "lstm": Workload(lstm_inputs, lstm, lstm, target=1.0),
    "chargpt": Workload(chargpt_inputs, chargpt, chargpt, target=1.0),
    "lenet_replay": Workload(lenet_inputs, lenet_replay, lenet_replay, target=1.0),
    "lstm_replay": Workload(lstm_inputs, lstm_replay, lstm_replay, target=1.0),
    "chargpt_replay": Workload(chargpt_inputs, chargpt_replay, chargpt_replay, target=1.0),
}


# --- measurement -------------------------------------------------------------

def _to_numpy(t):
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t.numpy())


def value_and_grads(fn, lib, inputs, side="tapegrad"):
    if side in ("limit", "numba"):
        return fn(lib, inputs)
    if side == "jax":
        loss, grads = fn(lib, inputs)
        if not isinstance(grads, (tuple, list)):
            grads = [grads]
        return np.asarray(loss), [np.asarray(g) for g in grads]
    loss, leaves = fn(lib, inputs)
    return _to_numpy(loss), [_to_numpy(leaf.grad) for leaf in leaves]


def compare_grads(name, ours, theirs, other="torch"):
    """Mismatch lines (empty when tapegrad and the other side agree)."""
    lines = []
    pairs = [("value", ours[0], theirs[0])] + [
        (f"grad[{i}]", a, b) for i, (a, b) in enumerate(zip(ours[1], theirs[1]))]
    for label, a, b in pairs:
        if a.shape != b.shape or not np.allclose(a, b):
            diff = np.max(np.abs(a - b)) if a.shape == b.shape else "shape"
            lines.append(f"MISMATCH {name}: {label} tapegrad vs {other}, "
                         f"shapes {a.shape} vs {b.shape}, max |diff| = {diff}")
    return lines


BLOCK_S = 0.01      # a sample is a block of calls of about this many seconds (at most BLOCK_CALLS)
BLOCK_CALLS = 50


def _sample(fn, lib, inputs, calls=1):
    """Seconds per call over a block of ``calls`` calls.  Each result is dropped inside
    the timed region so graph teardown counts.  The collector is off, as in timeit, so
    a pause triggered by the other library's garbage does not land in this sample; no
    gc.collect() in between, as walking the heap evicts the caches (it doubled the mlp
    times)."""
    gc.disable()
    try:
        t0 = perf_counter()
        for _ in range(calls):
            fn(lib, inputs)
        return (perf_counter() - t0) / calls
    finally:
        gc.enable()


def _block(fn, lib, inputs):
    """Calls per sample: a block of about BLOCK_S seconds, so that a call of microseconds
    is not timed right after the other side's call has evicted its caches."""
    t = min(_sample(fn, lib, inputs) for _ in range(3))
    return max(1, min(BLOCK_CALLS, int(BLOCK_S / max(t, 1e-9))))


def run_workload(name, wl, tg, torch, repeat, warmup, seed=0, jax=None, numba=None):
    inputs = wl.make_inputs(np.random.default_rng(seed))
    sides = [("tapegrad", wl.tapegrad_fn, tg)]
    if torch is not None:
        sides.append(("torch", wl.torch_fn, torch))
    if wl.limit_fn is not None:
        sides.append(("limit", wl.limit_fn, None))
    if jax is not None and wl.jax_fn is not None:
        sides.append(("jax", wl.jax_fn, jax))
    if numba is not None and wl.numba_fn is not None:
        sides.append(("numba", wl.numba_fn, numba))

    # The first tapegrad call compiles Numba kernels (and JAX's its jit); these
    # checks double as warm-up.
    results = {side: value_and_grads(fn, lib, inputs, side) for side, fn, lib in sides}
    mismatches = []
    for other in results:
        if other != "tapegrad":
            mismatches += compare_grads(name, results["tapegrad"], results[other], other)
    for _ in range(warmup):
        for _side, fn, lib in sides:
            fn(lib, inputs)
    _settle(name, wl.tapegrad_fn, tg, inputs)

    # Alternate blocks of calls of each library (and which goes first) so drift and
    # noise on the shared cores hit both sides alike.
    calls = {side: _block(fn, lib, inputs) for side, fn, lib in sides}
    times = {side: [] for side, _, _ in sides}
    for i in range(repeat):
        for side, fn, lib in (sides if i % 2 == 0 else sides[::-1]):
            times[side].append(_sample(fn, lib, inputs, calls[side]))

    row = {"workload": name, "target": wl.target, "mismatches": mismatches,
           "tapegrad_ms": 1e3 * statistics.median(times["tapegrad"])}
    for side in LIMIT_SIDES:
        if side in times:
            row[side + "_ms"] = 1e3 * statistics.median(times[side])
            row[side + "_ratio"] = row["tapegrad_ms"] / row[side + "_ms"]     # tapegrad's time as a multiple of it
    compiled = _compiled_for(name)
    if compiled is not None and name.endswith(("_fused", "_replay")) and name not in ("chain_replay", "mlp_replay"):
        row["fusion"] = [_plain(d) for d in compiled.fusion()]
    if torch is not None:
        row["torch_ms"] = 1e3 * statistics.median(times["torch"])
        row["ratio"] = row["tapegrad_ms"] / row["torch_ms"]
        row["pass"] = row["ratio"] <= wl.target
    return row


def _plain(d):
    """``Recording.fusion()``'s dict with plain Python values (for JSON)."""
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in d.items()}


# the limits, timed beside tapegrad where a workload has them: NumPy by hand, jax.jit, Numba by hand
LIMIT_SIDES = ("limit", "jax", "numba")
_LIMIT_HEAD = {"limit": "NumPy", "jax": "jax.jit", "numba": "Numba"}


def format_table(rows, with_torch):
    """tapegrad's and torch's median ms, their ratio against the target, and each
    limit's ms with tapegrad's time as a multiple of it (``x``)."""
    head = ["workload", "tapegrad ms"]
    if with_torch:
        head += ["torch ms", "ratio", "target", "result"]
    limits = [side for side in LIMIT_SIDES if any(side + "_ms" in r for r in rows)]
    for side in limits:
        head += [_LIMIT_HEAD[side] + " ms", "x"]
    body = []
    for r in rows:
        line = [r["workload"], f"{r['tapegrad_ms']:.3f}"]
        if with_torch:
            line += [f"{r['torch_ms']:.3f}", f"{r['ratio']:.3f}", f"<= {r['target']:g}",
                     "PASS" if r["pass"] else "FAIL"]
        for side in limits:
            line += [f"{r[side + '_ms']:.3f}", f"{r[side + '_ratio']:.2f}"] if side + "_ms" in r else ["-", "-"]
        body.append(line)
    widths = [max(len(row[i]) for row in [head] + body) for i in range(len(head))]

    def fmt(cells):  # workload name left-aligned, numbers right-aligned
        return "  ".join(c.rjust(w) if i else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(b) for b in body])


def format_fusion(f):
    """One line from a ``Recording.fusion()`` dict."""
    if not f.get("fused"):
        return "not fused: " + f.get("why", "?")
    return (f"{f['entries']} entries in {f['groups']} fused group(s), {f['calls']} call(s) between them, "
            f"{f['bytes_saved'] / 1e6:.1f} MB of intermediates not written, compiled in {f['compile_s']:.2f} s"
            + (" (from Numba's cache)" if f.get("cached") else ""))


def chain_sweep_share(tg, runs=20):
    """Where the eager chain's time goes: the share inside the compiled reverse sweep."""
    inputs = chain_inputs(np.random.default_rng(0))
    with tg.profile() as p:
        for _ in range(runs):
            chain(tg, inputs)
    return (f"chain (eager): {p.sweep_s / p.wall_s:.1%} of the time inside the compiled reverse sweep, "
            f"{p.backward_s / p.wall_s:.1%} inside backward(), the rest recording")


def first_calls(tg, names):
    """The first call of each replayed workload (it records the tape), next to JAX's
    jit compile time for the same function when JAX is installed."""
    lines = ["first call (recording) of the replayed workloads:"]
    for name in names:
        base = name[:-len("_replay")]
        wl = WORKLOADS[name]
        inputs = wl.make_inputs(np.random.default_rng(0))
        times = []
        for _ in range(3):
            _COMPILED.pop(base, None)
            t0 = perf_counter()
            wl.tapegrad_fn(tg, inputs)
            times.append(perf_counter() - t0)
        lines.append(f"  {name:<13} {1e3 * statistics.median(times):9.3f} ms")
    if "chain_replay" not in names:     # (JAX compiles the chain for minutes: only when asked)
        return "\n".join(lines)
    try:
        import jax
    except ImportError:
        lines.append("  (JAX is not installed: pip install jax to compare with jax.jit's compile time)")
        return "\n".join(lines)
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    inp = chain_inputs(np.random.default_rng(0))

    def loss(y0, w):
        y = y0
        for _ in range(inp["steps"]):
            y = jnp.sin(y) * w + jnp.cos(y) * 0.5
        return y.sum()
    f = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    t0 = perf_counter()
    jax.block_until_ready(f(inp["y0"], inp["w"]))
    compile_s = perf_counter() - t0
    # Steady state, back to back, for both: blocks of calls of one library then the
    # other (the first two of each block dropped), so the machine's drift over the
    # minute hits both alike.
    steady, ours = [], []
    for _ in range(12):
        for side, call in ((steady, lambda: jax.block_until_ready(f(inp["y0"], inp["w"]))),
                           (ours, lambda: chain_replay(tg, inp))):
            for i in range(10):
                t0 = perf_counter()
                call()
                if i >= 2:
                    side.append(perf_counter() - t0)
    jax_ms, ours_ms = 1e3 * statistics.median(steady), 1e3 * statistics.median(ours)
    lines.append(f"  jax.jit chain: compile {compile_s:.2f} s, then {jax_ms:.3f} ms per call; tapegrad's replayed "
                 f"chain timed the same way: {ours_ms:.3f} ms = {ours_ms / jax_ms:.2f} x jax.jit (target <= 2)")
    return "\n".join(lines)


# --- a fresh tg.compile: its first calls against eager ones ------------------------------
FRESH = ("rk4", "chain", "mlp", "rosen", "lj")      # (each with a *_replay workload)


def fresh_calls(tg, name, calls, eager_calls=5):
    """Time each of the first ``calls`` calls (value and gradient) of a fresh tg.compile
    of workload ``name``'s body, against the median of ``2 * eager_calls`` eager calls
    (half before, half after).  rk4 gets a new parameter at every call.  Each call is
    timed by the wall clock and by the calling thread's CPU time (``time.thread_time``:
    what a busy machine's other processes do not inflate, nor a background thread's
    work; the GIL it waits for is in the wall clock only).  Returns a dict of the
    figures: for each clock, the recording call, the first replay, the slowest later
    call and the median of the last 100, as multiples of the eager median."""
    from time import thread_time
    eager_fn, replay_fn = WORKLOADS[name].tapegrad_fn, WORKLOADS[name + "_replay"].tapegrad_fn
    inputs = WORKLOADS[name].make_inputs(np.random.default_rng(0))
    p0 = inputs.get("p")

    def vary(i):
        if name == "rk4":
            inputs["p"] = p0 + 1e-3 * i

    def timed(fn):
        w0, c0 = perf_counter(), thread_time()
        fn(tg, inputs)
        return perf_counter() - w0, thread_time() - c0
    eager = []
    for i in range(eager_calls):
        vary(i)
        eager.append(timed(eager_fn))
    _COMPILED.pop(name, None)
    times, building = [], []
    for i in range(calls):
        vary(i)
        times.append(timed(replay_fn))
        if any(d.get("why") == "compiling in the background" for d in _COMPILED[name].fusion()):
            building.append(i + 1)          # (the next call runs while the fused loops are built)
    for i in range(eager_calls):
        vary(i)
        eager.append(timed(eager_fn))
    out = {"workload": name, "calls": calls, "during_build": len([i for i in building if i < calls]),
           "fusion": [_plain(d) for d in _COMPILED[name].fusion()], "stats": repr(_COMPILED[name].stats)}
    for k, clock in enumerate(("wall", "cpu")):
        e = statistics.median(t[k] for t in eager)
        ts = [t[k] for t in times]
        later = ts[2:] or [0.0]
        during = [ts[i] for i in building if i < len(ts)]
        out[clock] = {"eager_s": e, "record_x": ts[0] / e, "first_replay_x": ts[1] / e if len(ts) > 1 else None,
                      "worst_x": max(later) / e, "worst_call": 2 + int(np.argmax(later)) if ts[2:] else None,
                      "over_2x": sum(t > 2 * e for t in ts[1:]), "steady_x": statistics.median(ts[-100:]) / e,
                      "during_build_median_x": statistics.median(during) / e if during else None,
                      "during_build_worst_x": max(during) / e if during else None}
    return out


def _fresh_worker(name, calls):
    tg = importlib.import_module("tapegrad")
    # every kernel signature of the cache loaded first (the state of a program that has run
    # tapegrad for a while), so that the calls timed are a fresh tg.compile's, not a fresh process's
    importlib.import_module("tapegrad._background")._load()
    print(json.dumps(fresh_calls(tg, name, calls)))


def fresh_table(rows):
    head = ("workload", "clock", "eager ms", "record x", "1st replay x", "worst x (call)", "> 2x", "steady x",
            "building: calls, median x, worst x")
    body = []
    for r in rows:
        if "error" in r:
            body.append((r["workload"], "error: " + r["error"]) + ("",) * (len(head) - 2))
            continue
        for clock in ("wall", "cpu"):
            c = r[clock]
            b = ("%d, %.2f, %.2f" % (r["during_build"], c["during_build_median_x"], c["during_build_worst_x"])
                 if r["during_build"] else "-")
            body.append((r["workload"] if clock == "wall" else "", clock, "%.3f" % (1e3 * c["eager_s"]),
                         "%.2f" % c["record_x"], "%.2f" % c["first_replay_x"],
                         "%.2f (%d)" % (c["worst_x"], c["worst_call"]), str(c["over_2x"]), "%.3f" % c["steady_x"], b))
    widths = [max(len(str(row[i])) for row in [head] + body) for i in range(len(head))]

    def fmt(cells):
        return "  ".join(str(c).rjust(w) if i > 1 else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(b) for b in body])


def run_fresh(names, calls, cache=None):
    """Each workload's ``fresh_calls`` in a new process on a copy of a warm Numba cache
    (``cache``, warmed first when its stamp is not valid; default: a temporary one), so
    that tapegrad's kernels load from it and the fused loops are compiled cold, in the
    background, beside the calls timed."""
    import shutil
    import tempfile
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import fuse_background as fb
    template = cache or tempfile.mkdtemp(prefix="fresh-nbc-template-")
    rows = []
    try:
        fb._warm(template)
        for name in names:
            d = tempfile.mkdtemp(prefix="fresh-nbc-")
            try:
                shutil.copytree(template, d, dirs_exist_ok=True)
                for f in os.listdir(d):
                    if f.endswith(".lock"):
                        os.remove(os.path.join(d, f))
                p = subprocess.run([sys.executable, os.path.abspath(__file__), "--fresh-worker", name, str(calls)],
                                   env=fb._env(d), cwd=fb.HERE, capture_output=True, text=True)
                if p.returncode != 0:
                    rows.append({"workload": name, "error": (p.stderr.strip().splitlines() or ["?"])[-1]})
                else:
                    rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
            finally:
                shutil.rmtree(d, ignore_errors=True)
    finally:
        if cache is None:
            shutil.rmtree(template, ignore_errors=True)
    return rows


# --- the guards on what a compiled function reads from outside its arguments ----------------
GUARD_A, GUARD_B, GUARD_C, GUARD_D, GUARD_E = 0.5, 2, 1.5, True, "tanh"
GUARD_OBJ = type("Settings", (), {})()
GUARD_OBJ.scale, GUARD_OBJ.shift = 2.0, 0.25


def guarded_body(x):
    """A function reading 5 globals (numbers, a flag, a string) and 2 attributes."""
    y = x * GUARD_A * GUARD_OBJ.scale + GUARD_OBJ.shift
    for _ in range(GUARD_B):
        y = y * GUARD_C
    return (y.tanh() if GUARD_E == "tanh" else y.sin()).sum() if GUARD_D else y.sum()


def guard_cost(tg, rounds=21, calls=20000):
    """Microseconds per call of the guards of ``guarded_body`` (the generated check a
    replay runs first, median of ``rounds`` blocks), and how many values they check."""
    f = tg.compile(guarded_body)
    x = tg.tensor(np.linspace(-1.0, 1.0, 8))
    f(x)
    f(x)
    (R,) = next(iter(f.cache.values()))
    check, args, kwargs = R.captures.check, (x,), {}
    times = []
    for _ in range(rounds):
        t0 = perf_counter()
        for _ in range(calls):
            check(args, kwargs)
        times.append((perf_counter() - t0) / calls)
    return 1e6 * statistics.median(times), len(R.captures)


def replay_peak_memory(tg, name="rosen_replay", calls=3):
    """Peak memory traced (tracemalloc) during one steady-state call of a replayed
    workload, as a multiple of its input's bytes (issue 20's target: <= 3 for rosen)."""
    import tracemalloc
    wl = WORKLOADS[name]
    inputs = wl.make_inputs(np.random.default_rng(0))
    nbytes = sum(v.nbytes for v in inputs.values() if isinstance(v, np.ndarray))
    for _ in range(8):          # (recorded, fused as the timed runs were, kept buffers warm)
        wl.tapegrad_fn(tg, inputs)
    peaks = []
    for _ in range(calls):
        tracemalloc.start()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        wl.tapegrad_fn(tg, inputs)
        peaks.append(tracemalloc.get_traced_memory()[1] - base)
        tracemalloc.stop()
    peak = min(peaks)
    return peak / nbytes, (f"peak memory of one {name} call (tracemalloc): {peak / 2 ** 20:.1f} MiB, "
                           f"{peak / nbytes:.2f} x the input's {nbytes / 2 ** 20:.1f} MiB (target <= 3)")


SIDES = (("tapegrad eager", None, "tapegrad_ms"), ("tapegrad replayed", "_replay", "tapegrad_ms"),
         ("tapegrad fused", "_fused", "tapegrad_ms"), ("PyTorch", None, "torch_ms"), ("JAX", None, "jax_ms"), ("hand-written", None, "limit_ms"),
         ("hand-written Numba", None, "numba_ms"))


def _commit():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10)
        # (changes to what is measured: the package and the benchmarks)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "../tapegrad", "."],
                               cwd=here, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None, None
    if out.returncode != 0:
        return None, None
    return out.stdout.strip(), bool(dirty.stdout.strip())


def write_json(path, rows, args, tg, torch, jax):
    """Every time of the run, grouped per workload for ``benchmarks/plot.py``, with
    what was measured and where."""
    by_name = {r["workload"]: r for r in rows}
    groups = {}
    for name, row in by_name.items():
        if name.endswith(("_replay", "_fused")):
            continue
        group = {}
        for label, suffix, key in SIDES:
            r = by_name.get(name + suffix) if suffix else row
            if r is not None and key in r:
                group[label] = r[key]
        groups[name] = group
    for name, row in by_name.items():       # a replayed or fused workload run without its eager one
        base, _, kind = name.rpartition("_")
        if kind not in ("replay", "fused") or base in by_name:
            continue
        group = groups.setdefault(base, {})
        group["tapegrad replayed" if kind == "replay" else "tapegrad fused"] = row["tapegrad_ms"]
        for label, suffix, key in SIDES:
            if suffix is None and key != "tapegrad_ms" and key in row:
                group.setdefault(label, row[key])
    commit, dirty = _commit()
    numba = sys.modules.get("numba")
    scipy = importlib.import_module("scipy")
    meta = {
        "commit": commit, "uncommitted_changes": dirty,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"node": platform.node(), "system": platform.system(), "release": platform.release(),
                    "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count()},
        "setting": {"repeat": args.repeat, "warmup": args.warmup, "dtype": "float64", "threads": 1,
                    "statistic": "median ms of value and gradient per call"},
        "versions": {"python": platform.python_version(), "tapegrad": getattr(tg, "__version__", None),
                     "numpy": np.__version__, "scipy": scipy.__version__,
                     "numba": getattr(numba, "__version__", None),
                     "torch": getattr(torch, "__version__", None), "jax": getattr(jax, "__version__", None)},
        "workloads": {name: (WORKLOADS[name].tapegrad_fn.__doc__ or "").strip().split("\n")[0]
                      for name in groups if name in WORKLOADS},
    }
    with open(path, "w") as f:
        json.dump({"meta": meta, "groups": groups, "results": rows}, f, indent=2)
        f.write("\n")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=21, help="timed runs per library (median)")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs after the check")
    p.add_argument("--only", default=",".join(WORKLOADS),
                   help="comma-separated workloads (default: all)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--fresh", type=int, metavar="N", default=0,
                   help="only time the first N calls of a fresh tg.compile of %s, each in a new process "
                        "(the fused loops compiled cold), against eager calls" % ", ".join(FRESH))
    p.add_argument("--cache", metavar="DIR", help="--fresh: a Numba cache to copy (warmed first if needed)")
    p.add_argument("--fresh-worker", nargs=2, metavar=("NAME", "N"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.only = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in args.only if n not in WORKLOADS]
    if unknown:
        p.error(f"unknown workload(s) {unknown}; choose from {list(WORKLOADS)}")
    if args.repeat < 1:
        p.error("--repeat must be >= 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.fresh_worker:
        _fresh_worker(args.fresh_worker[0], int(args.fresh_worker[1]))
        return 0
    if args.fresh:
        names = [n for n in FRESH if n in args.only] if len(args.only) < len(WORKLOADS) else list(FRESH)
        rows = run_fresh(names, args.fresh, args.cache)
        print("the first %d calls of a fresh tg.compile (value and gradient), as multiples of an eager call's "
              "median, by the wall clock and by the calling thread's CPU time; each workload in a new process, "
              "the fused loops compiled cold in the background" % args.fresh)
        print(fresh_table(rows))
        for r in rows:
            for f in r.get("fusion", ()):
                print(f"fusion of {r['workload']}: " + format_fusion(f))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"fresh": rows}, f, indent=2)
                f.write("\n")
        return 0
    tg = importlib.import_module("tapegrad")
    importlib.import_module("tapegrad._jit").load()     # time the compiled sweep, not the interpreted start
    try:
        import torch
    except ImportError:
        torch = None
        print("torch is not installed: showing tapegrad times only, no ratios.")
    else:
        torch.set_num_threads(1)
    try:
        import jax
    except ImportError:
        jax = None
    else:
        jax.config.update("jax_enable_x64", True)

    numba = importlib.import_module("numba") if any(WORKLOADS[n].numba_fn for n in args.only) else None
    rows = []
    for name in args.only:
        row = run_workload(name, WORKLOADS[name], tg, torch, args.repeat, args.warmup, jax=jax, numba=numba)
        for line in row["mismatches"]:
            print(line)
        rows.append(row)

    print(f"median of {args.repeat} runs, float64, 1 thread"
          + (f", torch {torch.__version__}" if torch is not None else ""))
    print(format_table(rows, torch is not None))
    if "chain" in args.only:
        print(chain_sweep_share(tg))
    replayed = [n for n in args.only if n.endswith("_replay")]
    if replayed:
        print(first_calls(tg, replayed))

    if replayed:
        us, n = guard_cost(tg)
        print(f"guards of a compiled function reading 5 globals and 2 attributes ({n} values): "
              f"{us:.3f} us per replayed call (target <= 2)")
    if "rosen_replay" in args.only:
        ratio, line = replay_peak_memory(tg)
        print(line)
        next(r for r in rows if r["workload"] == "rosen_replay")["peak_memory_x_input"] = ratio

    if any(side + "_ms" in r for r in rows for side in LIMIT_SIDES):
        print("NumPy, Numba: value and gradient written by hand; jax.jit(value_and_grad) in steady state; "
              "x: tapegrad's time as a multiple of that column's")
    for r in rows:
        for f in r.get("fusion", ()):
            print(f"fusion of {r['workload']}: " + format_fusion(f))

    if args.json:
        write_json(args.json, rows, args, tg, torch, jax)
    # Wrong gradients make the timings meaningless: fail loudly.
    return 1 if any(r["mismatches"] for r in rows) else 0


if __name__ == "__main__":
    # Run as a file, sys.path[0] is benchmarks/; make the checkout's tapegrad importable.
    sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
