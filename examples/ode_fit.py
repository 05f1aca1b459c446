"""Fit the damping and frequency of an oscillator by differentiating through RK4.

    pip install -e ".[examples]"        # only numpy/scipy are needed
    python examples/ode_fit.py [--steps N] [--iters K] [--lr LR] [--seed S]

The model is the damped oscillator

    x'' = -2 zeta omega x' - omega^2 x,   x(0) = 1, x'(0) = 0,

integrated over t in [0, T] with N explicit fourth-order Runge-Kutta steps written
with tapegrad scalar tensors (the state is the pair (x, v)). Synthetic
observations of x, with Gaussian noise and a fixed seed, are taken from the true
parameters; (zeta, omega) are then fitted from a wrong initial guess by Adam on
the mean squared error, each gradient flowing back through every RK4 step.
Prints fitted vs true parameters and the time per gradient.
"""
import argparse
import sys
from time import perf_counter

import numpy as np

import tapegrad as tg

TRUE = (0.15, 2.0)          # (zeta, omega)
GUESS = (0.3, 1.7)


def simulate(zeta, omega, x0, v0, dt, steps, every):
    """RK4 for (x, v); returns the list of x at steps every, 2*every, ... (tensors or floats)."""
    a1, a2 = 2 * zeta * omega, omega * omega

    def f(x, v):
        return v, -a1 * v - a2 * x

    x, v = x0, v0
    out = []
    for i in range(1, steps + 1):
        k1x, k1v = f(x, v)
        k2x, k2v = f(x + 0.5 * dt * k1x, v + 0.5 * dt * k1v)
        k3x, k3v = f(x + 0.5 * dt * k2x, v + 0.5 * dt * k2v)
        k4x, k4v = f(x + dt * k3x, v + dt * k3v)
        x = x + dt / 6 * (k1x + 2 * k2x + 2 * k3x + k4x)
        v = v + dt / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
        if i % every == 0:
            out.append(x)
    return out


def make_data(steps, t_end, every, noise, seed):
    dt = t_end / steps
    clean = np.array(simulate(TRUE[0], TRUE[1], 1.0, 0.0, dt, steps, every))
    rng = np.random.default_rng(seed)
    return clean + noise * rng.standard_normal(clean.shape)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=400, help="RK4 steps over [0, T]")
    p.add_argument("--t-end", type=float, default=10.0)
    p.add_argument("--every", type=int, default=5, help="observe x every this many steps")
    p.add_argument("--noise", type=float, default=0.02)
    p.add_argument("--iters", type=int, default=150, help="Adam iterations")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None):
    """Fit; return a dict with zeta, omega, true, loss and grad_time_s."""
    args = parse_args(argv)
    obs = tg.tensor(make_data(args.steps, args.t_end, args.every, args.noise, args.seed))
    dt = args.t_end / args.steps
    params = tg.tensor(list(GUESS), requires_grad=True)      # (zeta, omega)
    opt = tg.optim.Adam([params], lr=args.lr)

    @tg.compile
    def loss_fn(params):
        """The misfit through all RK4 steps: recorded once (a few thousand scalar
        ops), replayed at every iteration with the updated parameters."""
        xs = simulate(params[0], params[1], 1.0, 0.0, dt, args.steps, args.every)
        return ((tg.stack(xs) - obs) ** 2).mean()

    def step():
        """One value-and-gradient, then an Adam update."""
        opt.zero_grad()
        loss = loss_fn(params)
        loss.backward()
        opt.step()
        return loss.item()

    times = []
    for it in range(args.iters):
        t0 = perf_counter()
        loss = step()
        times.append(perf_counter() - t0)
        if it % max(1, args.iters // 10) == 0 or it == args.iters - 1:
            z, w = params.detach().numpy()
            print(f"iter {it:4d}  loss {loss:.3e}  zeta {z:.4f}  omega {w:.4f}")
    zeta, omega = (float(v) for v in params.detach().numpy())
    per_grad = float(np.median(times[1:] if len(times) > 1 else times))
    print(f"{args.steps} RK4 steps, {len(obs)} noisy observations (sigma {args.noise}), {args.iters} Adam steps")
    print(f"fitted zeta = {zeta:.4f}  (true {TRUE[0]}, {abs(zeta / TRUE[0] - 1) * 100:.2f}% off)")
    print(f"fitted omega = {omega:.4f}  (true {TRUE[1]}, {abs(omega / TRUE[1] - 1) * 100:.2f}% off)")
    print(f"time per gradient (forward + backward + update): {per_grad * 1e3:.2f} ms")
    return {"zeta": zeta, "omega": omega, "true": TRUE, "loss": loss, "grad_time_s": per_grad}


if __name__ == "__main__":
    main(sys.argv[1:])
