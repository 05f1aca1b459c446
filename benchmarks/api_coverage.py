"""Re-measure tapegrad's coverage of the PyTorch API against torch itself.

    python benchmarks/api_coverage.py [--json out.json] [--section top150|numeric|all]
                                      [--names NAME,NAME...] [--verbose]

The names and their checks are in ``benchmarks/data/coverage_names.json``: the 150 most
used PyTorch names of ``api-coverage.md`` (section ``top150``) and the PyTorch spellings of
the numeric-script reference, HIPS autograd's differentiable ops and the jax.numpy names
(section ``numeric``).  Each check is a snippet of Python run twice, once with ``torch``,
``F``, ``nn``, ``optim``... bound to PyTorch and once bound to tapegrad, on the same random
float64 inputs.  Every output leaf is compared (shape, dtype by name, values at
rtol=atol=1e-7, 1e-6 when float32 is involved), then ``sum(out_i * r_i)`` for fixed random
``r_i`` is backpropagated and every input gradient (and the gradient of every module
parameter passed through ``same_init``) is compared too.

Status of a name:

- ``missing``: tapegrad has no such name;
- ``wrong``: a value, dtype, shape or gradient differs, or tapegrad raises on the basic
  (first) check where torch does not;
- ``partial``: the basic check matches but tapegrad raises on another check (a keyword or
  an overload it does not accept);
- ``ok``: every check matches;
- ``not checked``: the name exists but has no check (the entry gives the reason).

A check that fails only because it needs another missing name (tapegrad raises
``AttributeError`` for a name other than the one under test) is skipped, not held against
the name.  A check on which torch itself raises is a mistake in the data file and is
reported as ``check error``.

Needs torch (``pip install torch==2.13.0``); this is a script, not part of the test suite
(``tests/test_coverage_script.py`` runs the checker on three names).
"""
import argparse
import json
import math
import numbers
import os
import re
import subprocess
import sys
import tempfile
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data", "coverage_names.json")

RTOL = ATOL = 1e-7
RTOL32 = ATOL32 = 1e-6
STATUSES = ("ok", "partial", "wrong", "missing", "not checked")

# Where a prefix of a name lives, as a path of attributes from the library's root module.
PREFIXES = {
    "torch": (),
    "Tensor": ("Tensor",),
    "nn": ("nn",),
    "F": ("nn", "functional"),
    "optim": ("optim",),
    "Optimizer": ("optim", "Optimizer"),
    "Module": ("nn", "Module"),
    "linalg": ("linalg",),
    "special": ("special",),
    "fft": ("fft",),
    "cuda": ("cuda",),
    "data": ("utils", "data"),
    "distributions": ("distributions",),
    "autograd": ("autograd",),
    "AF": ("autograd", "functional"),
    "lr_scheduler": ("optim", "lr_scheduler"),
    "func": ("func",),
}
# Names checked by their snippets only (operators, interop): always "present".
ALWAYS_PRESENT = ("op", "interop")


class _Missing:
    """Stands for a submodule a library lacks; any attribute access raises."""

    def __init__(self, path):
        self._path = path

    def __getattr__(self, attr):
        raise AttributeError(f"module '{self._path}' has no attribute '{attr}' "
                             f"({self._path} does not exist)")

    def __call__(self, *a, **k):
        raise AttributeError(f"'{self._path}' does not exist")


def _lookup(root, path):
    obj = root
    for part in path:
        obj = getattr(obj, part)
    return obj


def _bind(root, path, label):
    try:
        return _lookup(root, path)
    except AttributeError:
        return _Missing(label + "." + ".".join(path))


def resolve(lib, name):
    """The object ``name`` (e.g. ``"F.softmax"``, ``"Tensor.to"``) stands for in ``lib``;
    raises AttributeError when it does not exist."""
    prefix, _, rest = name.partition(".")
    if prefix in ALWAYS_PRESENT:
        return True
    if prefix not in PREFIXES:
        raise ValueError(f"unknown prefix in {name!r}")
    base = _lookup(lib, PREFIXES[prefix])
    parts = rest.split(".") if rest else []
    try:
        return _lookup(base, parts)
    except AttributeError:
        if prefix == "Tensor" and len(parts) == 1:
            # an instance attribute (set in __init__, not on the class)
            return getattr(lib.ones(1), parts[0])
        raise


def present(lib, name):
    try:
        resolve(lib, name)
        return True
    except AttributeError:
        return False


# ---------------------------------------------------------------------------------------
# inputs

def _gen_functions(rng):
    def shape(args):
        return tuple(int(a) for a in args)

    def randn(*s):
        return rng.standard_normal(shape(s))

    def randn32(*s):
        return rng.standard_normal(shape(s)).astype(np.float32)

    def uniform(lo, hi, *s):
        return rng.uniform(lo, hi, shape(s))

    def pos(*s):
        return rng.uniform(0.5, 2.0, shape(s))

    def unit(*s):
        return rng.uniform(-0.9, 0.9, shape(s))

    def prob(*s):
        return rng.uniform(0.05, 0.95, shape(s))

    def gt1(*s):
        return rng.uniform(1.2, 3.0, shape(s))

    def integers(lo, hi, *s):
        return rng.integers(lo, hi, shape(s)).astype(np.int64)

    def boolean(*s):
        return rng.random(shape(s)) < 0.5

    def spd(n, *batch):
        a = rng.standard_normal(shape(batch) + (n, n))
        return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)

    def wellcond(n, *batch):
        return rng.standard_normal(shape(batch) + (n, n)) + 3 * np.eye(n)

    def simplex(*s):
        a = rng.uniform(0.1, 1.0, shape(s))
        return a / a.sum(-1, keepdims=True)

    def array(v, dtype="float64"):
        return np.array(v, dtype=dtype)

    return dict(randn=randn, randn32=randn32, uniform=uniform, pos=pos, unit=unit,
                prob=prob, gt1=gt1, int=integers, bool=boolean, spd=spd,
                wellcond=wellcond, simplex=simplex, array=array)


def make_inputs(specs, seed):
    """numpy arrays from the input specs of a check (``{"x": "randn(3, 4)"}``)."""
    rng = np.random.default_rng(seed)
    funcs = _gen_functions(rng)
    out = {}
    for key in sorted(specs):
        spec = specs[key]
        nograd = spec.endswith(" nograd")
        if nograd:
            spec = spec[: -len(" nograd")]
        out[key] = (np.asarray(eval(spec, {"__builtins__": {}}, funcs)), not nograd)
    return out


# ---------------------------------------------------------------------------------------
# the two sides

class Side:
    """One library (torch or tapegrad) with the helpers a snippet may call."""

    def __init__(self, lib, label, shared):
        self.lib = lib
        self.label = label
        self.is_torch = label == "torch"
        self.shared = shared  # state passed from the torch run to the tapegrad run

    def is_tensor(self, obj):
        return isinstance(obj, self.lib.Tensor)

    def namespace(self):
        lib, L = self.lib, self.label
        ns = {
            "torch": lib,
            "np": np,
            "nn": _bind(lib, ("nn",), L),
            "F": _bind(lib, ("nn", "functional"), L),
            "optim": _bind(lib, ("optim",), L),
            "AF": _bind(lib, ("autograd", "functional"), L),
            "linalg": _bind(lib, ("linalg",), L),
            "special": _bind(lib, ("special",), L),
            "fft": _bind(lib, ("fft",), L),
            "data": _bind(lib, ("utils", "data"), L),
            "distributions": _bind(lib, ("distributions",), L),
            "lr_scheduler": _bind(lib, ("optim", "lr_scheduler"), L),
            "same_init": self.same_init,
            "meta": self.meta,
            "train": self.train,
            "tmpfile": self.tmpfile,
            "IS_TORCH": self.is_torch,
        }
        return ns

    # helpers ---------------------------------------------------------------------------
    def same_init(self, module):
        """torch: remember the module's initial parameters; tapegrad: copy them in.
        The parameters join the inputs whose gradients are compared."""
        params = list(module.parameters())
        store = self.shared.setdefault("params", [])
        if self.is_torch:
            store.append([p.detach().numpy().copy() for p in params])
        else:
            k = self.shared.setdefault("param_cursor", 0)
            self.shared["param_cursor"] = k + 1
            arrays = store[k]
            if len(arrays) != len(params):
                raise AssertionError(f"module has {len(params)} parameters, torch's has "
                                     f"{len(arrays)}")
            with self.lib.no_grad():
                for p, a in zip(params, arrays):
                    p.copy_(self.lib.tensor(a))
        self.grad_params.extend(params)
        return module

    def meta(self, t):
        """(shape, dtype) of a tensor: for random or uninitialised results."""
        return (tuple(t.shape), t.dtype)

    def tmpfile(self):
        d = self.shared.setdefault("tmpdir", tempfile.mkdtemp(prefix="tg-coverage-"))
        return os.path.join(d, f"{self.label}.pt")

    def train(self, make_opt, steps=6, sched=None, reload_at=None, closure=False):
        """Run an optimizer ``steps`` steps on sum(tanh(X @ W + b)**2) + 0.1*sum(W**2);
        returns W, b and the lr after every step.  ``reload_at=k``: after step k, continue
        with a new optimizer given the old one's ``state_dict()``; ``closure``: step(closure),
        whose returned loss joins the trace."""
        lib = self.lib
        rng = np.random.default_rng(12345)
        X = lib.tensor(rng.standard_normal((5, 3)))
        W = lib.nn.Parameter(lib.tensor(rng.standard_normal((3, 2))))
        b = lib.nn.Parameter(lib.tensor(rng.standard_normal(2)))
        opt = make_opt([W, b])
        sch = sched(opt) if sched is not None else None
        trace = []
        def f():
            opt.zero_grad()
            loss = (lib.tanh(X @ W + b) ** 2).sum() + 0.1 * (W ** 2).sum()
            loss.backward()
            return loss

        for k in range(steps):
            if closure:
                ret = float(opt.step(f))
            else:
                f()
                ret = opt.step()
            if sch is not None:
                sch.step()
            trace.append((W.detach().clone(), b.detach().clone(),
                          float(opt.param_groups[0]["lr"]), ret))
            if reload_at == k + 1:
                state = opt.state_dict()
                opt = make_opt([W, b])
                opt.load_state_dict(state)
        return trace

    # running -----------------------------------------------------------------------------
    def run(self, check, arrays):
        """Run the snippet; returns (output, grad_inputs list)."""
        lib = self.lib
        self.grad_params = []
        ns = self.namespace()
        grad_inputs = []
        for key, (arr, want_grad) in arrays.items():
            t = lib.tensor(arr.copy())
            if want_grad and check.get("grad", True) and arr.dtype.kind == "f":
                t.requires_grad_(True)
                grad_inputs.append((key, t))
            ns[key] = t
        src = check["src"]
        if "\n" in src or re.match(r"^\s*out\s*=", src) or ";" in src:
            exec(compile(src, "<check>", "exec"), ns)
            out = ns["out"]
        else:
            out = eval(compile(src, "<check>", "eval"), ns)
        grad_inputs += [(f"param{i}", p) for i, p in enumerate(self.grad_params)]
        return out, grad_inputs


# ---------------------------------------------------------------------------------------
# comparing

def _dtype_name(dt):
    """"float64" for torch.float64 and for tapegrad's (NumPy's) float64."""
    s = str(dt)
    return s[len("torch."):] if s.startswith("torch.") else str(np.dtype(dt))


def leaves(side, obj, path="out"):
    """Flatten an output into (path, kind, payload) leaves."""
    if side.is_tensor(obj):
        yield path, "tensor", obj
    elif isinstance(obj, dict):
        for k in sorted(obj, key=str):
            yield from leaves(side, obj[k], f"{path}[{k!r}]")
    elif isinstance(obj, (tuple, list)):
        yield path, "len", len(obj)
        for i, v in enumerate(obj):
            yield from leaves(side, v, f"{path}[{i}]")
    elif isinstance(obj, (bool, np.bool_)):
        yield path, "bool", bool(obj)
    elif isinstance(obj, numbers.Integral):
        yield path, "int", int(obj)
    elif isinstance(obj, numbers.Real):
        yield path, "float", float(obj)
    elif isinstance(obj, str):
        yield path, "str", obj
    elif obj is None:
        yield path, "none", None
    elif isinstance(obj, np.ndarray):
        yield path, "ndarray", obj
    elif _is_dtype(side, obj):
        yield path, "dtype", _dtype_name(obj)
    else:
        yield path, "object", type(obj).__name__


def _is_dtype(side, obj):
    if side.is_torch:
        return isinstance(obj, side.lib.dtype)
    return isinstance(obj, np.dtype) or (isinstance(obj, type) and issubclass(obj, np.generic))


def _to_numpy(side, t):
    t = t.detach()
    if side.is_torch:
        t = t.resolve_conj().resolve_neg()      # (torch's lazy conjugate and negative bits)
    return np.asarray(t.numpy())


def _close(a, b, tol32):
    rtol, atol = (RTOL32, ATOL32) if tol32 else (RTOL, ATOL)
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        return np.array_equal(a, b)
    return np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol,
                       equal_nan=True)


def compare_outputs(tside, gside, tout, gout, rtol=None):
    """None when the two outputs match, else a one-line reason."""
    tl = list(leaves(tside, tout))
    gl = list(leaves(gside, gout))
    if len(tl) != len(gl):
        return f"structure: torch has {len(tl)} leaves, tapegrad {len(gl)}"
    for (tp, tk, tv), (gp, gk, gv) in zip(tl, gl):
        if tk != gk:
            # a 0-d tensor against a Python number is a kind mismatch worth reporting
            return f"{tp}: torch gives {tk}, tapegrad {gk}"
        if tk == "tensor":
            tdt, gdt = _dtype_name(tv.dtype), _dtype_name(gv.dtype)
            if tdt != gdt:
                return f"{tp}: dtype torch {tdt}, tapegrad {gdt}"
            if tuple(tv.shape) != tuple(gv.shape):
                return f"{tp}: shape torch {tuple(tv.shape)}, tapegrad {tuple(gv.shape)}"
            a, b = _to_numpy(tside, tv), _to_numpy(gside, gv)
            tol32 = "float32" in (tdt, gdt) or "float16" in (tdt, gdt)
            if rtol is not None and not tol32:
                ok = np.allclose(a, b, rtol=rtol, atol=rtol, equal_nan=True)
            else:
                ok = _close(a, b, tol32)
            if not ok:
                err = np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64))) \
                    if a.size else 0.0
                return f"{tp}: values differ (max abs diff {err:.3g})"
        elif tk == "ndarray":
            if tv.shape != gv.shape or not _close(tv, gv, False):
                return f"{tp}: arrays differ"
        elif tk == "float":
            tol = rtol if rtol is not None else RTOL
            if not (math.isclose(tv, gv, rel_tol=tol, abs_tol=tol)
                    or (math.isnan(tv) and math.isnan(gv))):
                return f"{tp}: torch {tv!r}, tapegrad {gv!r}"
        elif tv != gv:
            return f"{tp}: torch {tv!r}, tapegrad {gv!r}"
    return None


def _weighted_loss(side, out, seed):
    """sum(out_i * r_i) over the float leaves that require grad; None if there are none."""
    lib = side.lib
    rng = np.random.default_rng(seed)
    total = None
    for path, kind, v in leaves(side, out):
        if kind != "tensor":
            continue
        r = rng.standard_normal(tuple(v.shape))
        if not (v.requires_grad and _dtype_name(v.dtype).startswith("float")):
            continue
        term = (v * lib.tensor(r.astype(_dtype_name(v.dtype)))).sum()
        total = term if total is None else total + term
    return total


def compare_grads(tside, gside, tout, gout, tinputs, ginputs, seed, rtol=None):
    """(None, number of gradients compared) when they match, else (reason, 0)."""
    treq = [p for p, k, v in leaves(tside, tout) if k == "tensor" and v.requires_grad]
    greq = [p for p, k, v in leaves(gside, gout) if k == "tensor" and v.requires_grad]
    if treq != greq:
        return f"requires_grad: torch on {treq}, tapegrad on {greq}", 0
    if not treq or not tinputs:
        return None, 0
    low = any(k == "tensor" and _dtype_name(v.dtype) in ("float32", "float16")
              for _, k, v in leaves(tside, tout))
    tl = _weighted_loss(tside, tout, seed)
    gl = _weighted_loss(gside, gout, seed)
    if tl is None:
        return None, 0
    tg_ = tside.lib.autograd.grad(tl, [t for _, t in tinputs], allow_unused=True)
    gg_ = gside.lib.autograd.grad(gl, [t for _, t in ginputs], allow_unused=True)
    for (name, _), a, b in zip(tinputs, tg_, gg_):
        if a is None and b is None:
            continue
        # None (no path to the input) against a gradient of zeros is a match
        a = None if a is None else _to_numpy(tside, a)
        b = None if b is None else _to_numpy(gside, b)
        if a is None:
            a = np.zeros_like(b)
        if b is None:
            b = np.zeros_like(a)
        if a.dtype != b.dtype:
            return f"grad {name}: dtype torch {a.dtype}, tapegrad {b.dtype}", 0
        if a.shape != b.shape:
            return f"grad {name}: shape torch {a.shape}, tapegrad {b.shape}", 0
        # a gradient that went through float32 arithmetic has float32's precision
        tol32 = low or a.dtype == np.float32 or b.dtype == np.float32
        ok = (np.allclose(a, b, rtol=rtol, atol=rtol, equal_nan=True)
              if rtol is not None and not tol32 else _close(a, b, tol32))
        if not ok:
            err = np.nanmax(np.abs(a - b)) if a.size else 0.0
            return f"grad {name}: differs (max abs diff {err:.3g})", 0
    return None, len(tinputs)


# ---------------------------------------------------------------------------------------
# checking one name

_MISSING_ATTR = re.compile(r"has no attribute '([A-Za-z_][A-Za-z0-9_]*)'")


def _libs():
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    import torch

    import tapegrad
    torch.set_default_dtype(torch.float64)
    return torch, tapegrad


def _short_exc(e):
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg[:160]}"


def _one_line(src, width=120):
    text = "; ".join(line.strip() for line in src.strip().splitlines())
    return text if len(text) <= width else text[: width - 3] + "..."


def run_check(check, name, index, torch, tapegrad):
    """One check -> dict(result=ok|mismatch|raises|skipped|check error, detail=...)."""
    label = check.get("label") or _one_line(check["src"])
    seed = 1000 + index
    arrays = make_inputs(check.get("inputs", {"x": "randn(3, 4)"}), seed)
    shared = {}
    tside = Side(torch, "torch", shared)
    gside = Side(tapegrad, "tapegrad", shared)
    expect_raise = check.get("raises", False)
    torch.manual_seed(0)
    try:
        tout, tin = tside.run(check, arrays)
        terr = None
    except Exception as e:  # noqa: BLE001 - any failure is a finding
        terr = e
    if terr is not None and not expect_raise:
        return dict(label=label, result="check error",
                    detail="torch raises " + _short_exc(terr))
    if terr is None and expect_raise:
        return dict(label=label, result="check error", detail="torch does not raise")
    tapegrad.manual_seed(0)
    try:
        gout, gin = gside.run(check, arrays)
        gerr = None
    except Exception as e:  # noqa: BLE001
        gerr = e
    if expect_raise:
        if gerr is None:
            return dict(label=label, result="mismatch",
                        detail=f"torch raises {_short_exc(terr)}; tapegrad does not")
        return dict(label=label, result="ok")
    if gerr is not None:
        needs = [n for n in check.get("needs", []) if not present(tapegrad, n)]
        if needs:
            return dict(label=label, result="skipped", detail="needs missing " + ", ".join(needs))
        m = _MISSING_ATTR.search(str(gerr))
        last = name.rsplit(".", 1)[-1]
        if isinstance(gerr, AttributeError) and m and m.group(1) != last:
            return dict(label=label, result="skipped",
                        detail=f"needs missing {m.group(1)} ({_short_exc(gerr)})")
        return dict(label=label, result="raises", detail=_short_exc(gerr))
    rtol = check.get("rtol")
    try:
        why = compare_outputs(tside, gside, tout, gout, rtol)
        ngrads = 0
        if why is None and check.get("grad", True):
            why, ngrads = compare_grads(tside, gside, tout, gout, tin, gin, seed + 7, rtol)
    except Exception as e:  # noqa: BLE001
        why = "comparison raised " + _short_exc(e)
        if os.environ.get("COVERAGE_DEBUG"):
            traceback.print_exc()
    if why is not None:
        return dict(label=label, result="mismatch", detail=why)
    return dict(label=label, result="ok", grads_compared=ngrads)


def check_entry(entry, libs=None):
    """Classify one entry of the data file: {"name": ..., "checks": [...]} -> result dict."""
    torch, tapegrad = libs or _libs()
    name = entry["name"]
    res = dict(name=name, rank=entry.get("rank"), section=entry.get("section"))
    if not present(tapegrad, name):
        res.update(status="missing", detail="", checks=[])
        return res
    checks = entry.get("checks", [])
    results = [run_check(c, name, i, torch, tapegrad) for i, c in enumerate(checks)]
    res["checks"] = results
    counted = [(i, r) for i, r in enumerate(results) if r["result"] in ("ok", "mismatch", "raises")]
    errors = [r for r in results if r["result"] == "check error"]
    if not counted:
        reason = entry.get("not_checked") or (
            "every check " + ("needs a missing name" if results and not errors else "errored")
            if results else "no check")
        res.update(status="not checked", detail=reason)
        if errors:
            res["detail"] += "; " + errors[0]["detail"]
        return res
    bad = [(i, r) for i, r in counted if r["result"] == "mismatch"]
    raised = [(i, r) for i, r in counted if r["result"] == "raises"]
    first = counted[0][0]
    if (name.startswith("op.") and not bad and raised and raised[0][0] == first
            and "unsupported operand" in raised[0][1]["detail"]):
        # an operator tapegrad's tensors do not define
        res.update(status="missing", detail=raised[0][1]["detail"])
        return res
    if bad or any(i == first for i, _ in raised):
        i, r = bad[0] if bad else raised[0]
        res.update(status="wrong", detail=f"`{r['label']}`: {r['detail']}")
    elif raised:
        i, r = raised[0]
        res.update(status="partial", detail=f"`{r['label']}` -> {r['detail']}")
    else:
        res.update(status="ok", detail=f"{len(counted)} check(s)")
    skipped = [r for r in results if r["result"] == "skipped"]
    if skipped:
        res["detail"] += f" ({len(skipped)} skipped: {skipped[0]['detail']})"
    if errors:
        res["detail"] += f" [check error: {errors[0]['detail']}]"
    return res


def load_entries(path=DATA):
    with open(path) as f:
        data = json.load(f)
    out = []
    top = {e["name"]: e for e in data["top150"]}
    for section in ("top150", "numeric"):
        for e in data[section]:
            e = dict(e)
            e["section"] = section
            if "checks" not in e and e["name"] in top:
                e["checks"] = top[e["name"]]["checks"]
            out.append(e)
    return out


def summarize(results):
    summary = {}
    for section in ("top150", "numeric"):
        rs = [r for r in results if r["section"] == section]
        summary[section] = {s: sum(r["status"] == s for r in rs) for s in STATUSES}
        summary[section]["total"] = len(rs)
        summary[section]["check errors"] = sum(
            c["result"] == "check error" for r in rs for c in r.get("checks", []))
    return summary


def _commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except Exception:  # noqa: BLE001
        return "unknown"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the results as JSON to this path")
    ap.add_argument("--section", choices=("top150", "numeric", "all"), default="all")
    ap.add_argument("--names", help="comma-separated names to check (default: all)")
    ap.add_argument("--verbose", action="store_true", help="print every check")
    args = ap.parse_args(argv)

    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    libs = _libs()
    torch, tapegrad = libs
    entries = load_entries()
    if args.section != "all":
        entries = [e for e in entries if e["section"] == args.section]
    if args.names:
        wanted = set(args.names.split(","))
        entries = [e for e in entries if e["name"] in wanted]
    results = [check_entry(e, libs) for e in entries]

    for section in ("top150", "numeric"):
        rs = [r for r in results if r["section"] == section]
        if not rs:
            continue
        print(f"\n## {section}\n")
        print(f"| rank | name | status | detail |\n|---:|---|---|---|")
        for r in rs:
            print(f"| {r['rank'] or '-'} | `{r['name']}` | {r['status']} | "
                  f"{r['detail'].replace('|', '/')} |")
            if args.verbose:
                for c in r["checks"]:
                    print(f"|   |   {c['result']} | `{c['label']}` | {c.get('detail', '')} |")
    summary = summarize(results)
    print()
    for section, s in summary.items():
        if s["total"]:
            print(f"{section}: {s['total']} names: " +
                  ", ".join(f"{s[k]} {k}" for k in STATUSES) +
                  (f"; {s['check errors']} check errors" if s["check errors"] else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(tapegrad_commit=_commit(), torch=torch.__version__,
                           numpy=np.__version__, summary=summary, names=results), f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
