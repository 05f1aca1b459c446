"""Write docs/ops.md, the list of supported operations, from tapegrad itself.

    python docs/gen_ops.py            # rewrite docs/ops.md
    python docs/gen_ops.py --check    # exit 1 if docs/ops.md is out of date

The page is derived, not written: the tape operations come from the opcode registry
(``tapegrad.core.registry``) and the families' compiled-forward lists; the public
names from the namespaces themselves (``tg``, ``tg.Tensor``, ``tg.nn.functional``,
``tg.linalg``, ``tg.special``, ``tg.fft``, ``tg.distributions``, ``tg.nn``, ``tg.optim``, ``tg.autograd``).  For every public operation the script
calls it on small example tensors (the first argument pattern that works) and reads
what the call did: the ``grad_fn`` of its result, the tape entries it appended, and
whether ``tg.compile`` replays it.  No backward is run, so Numba is never imported.
``tests/test_docs.py`` runs ``--check``.
"""
import argparse
import inspect
import os
import struct
import sys
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "ops.md")
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

import tapegrad as tg  # noqa: E402
from tapegrad.core import tape as _tape  # noqa: E402
from tapegrad.ops import reduce as _rd  # noqa: E402
from tapegrad.ops import shape as _sh  # noqa: E402
from tapegrad.ops.elementwise import NUMBER_FORWARD  # noqa: E402
from tapegrad.core.registry import (BINARY, FAMILY_NAMES, FAMILY_RULES, HOST, LINALG, META, OP_NAMES, REDUCE,
                                    SAVE_A, SAVE_B, SAVE_C, SAVE_OUT, SAVES_BY_RG, SHAPE, UNARY, family, index)

# Helpers that are importable from a public namespace but are not operations.
NOT_OPS = {"name_id", "commit_inplace", "zero_grads", "label_flags"}
# Methods that are not operations on values (properties and bookkeeping), listed apart.
TENSOR_ATTRIBUTES = {"T", "mT", "data", "dtype", "grad", "grad_fn", "is_leaf", "ndim", "requires_grad",
                     "retains_grad", "shape"}
TENSOR_BOOKKEEPING = {"backward", "dim", "item", "numel", "numpy", "register_hook",
                      "register_post_accumulate_grad_hook", "requires_grad_", "retain_grad", "size", "tolist"}
CREATION = {"arange", "empty", "empty_like", "eye", "from_numpy", "full", "full_like", "linspace",
            "ones", "ones_like", "rand", "randint", "randn", "tensor", "zeros", "zeros_like"}
UTILITIES = {"compile", "record", "load_tape", "profile", "manual_seed", "memory_stats", "no_grad",
             "enable_grad", "set_grad_enabled", "is_grad_enabled", "is_tensor", "gradcheck", "numel"}
OPERATORS = ["__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
             "__rtruediv__", "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__neg__", "__abs__",
             "__pos__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ipow__", "__lt__", "__le__",
             "__gt__", "__ge__", "__eq__", "__ne__", "__and__", "__or__", "__xor__", "__invert__",
             "__getitem__", "__setitem__"]


def _mask_text(mask):
    parts = [n for bit, n in ((SAVE_A, "a"), (SAVE_B, "b"), (SAVE_C, "c"), (SAVE_OUT, "out")) if mask & bit]
    return ", ".join(parts) or "-"


def saves_text(code):
    """What an entry keeps: with every input needing a gradient, and, where it differs,
    with only input a or only input b needing one (``registry.SAVES_BY_RG``)."""
    both, a_only, b_only, _ = SAVES_BY_RG[code]
    text = _mask_text(both)
    if family(code) == BINARY or family(code) == LINALG:
        if a_only != both or b_only != both:
            text += " (only a needs a gradient: %s; only b: %s)" % (_mask_text(a_only), _mask_text(b_only))
    return text


def replay_forward_text(code):
    """How a replay computes this entry when the compiled kernels are loaded."""
    fam, k = family(code), index(code)
    arena = (fam in (UNARY, BINARY, LINALG)
             or (fam == REDUCE and k in _rd.COMPILED_FORWARD)
             or (fam == SHAPE and k in _sh.COMPILED_FORWARD))
    scalar = k in FAMILY_RULES[fam].scalar_replay
    if fam == REDUCE and arena:
        arena_text = "compiled (groups of consecutive elements)"
    elif fam == SHAPE and arena:
        arena_text = "compiled (indices not from arguments)"
    else:
        arena_text = "compiled" if arena else "NumPy"
    return arena_text, "compiled" if scalar else "-"


def registry_table():
    lines = ["| tape op | family | opcode | saves for backward | compiled reverse | replay of arrays "
             "| replay of single numbers | single-number eager path |",
             "|---|---|---|---|---|---|---|---|"]
    for code in sorted(OP_NAMES):
        fam = family(code)
        if fam == META:
            continue
        name = OP_NAMES[code]
        arena, scalar = replay_forward_text(code)
        lines.append("| `%s` | %s | %d | %s | %s | %s | %s | %s |" % (
            name, FAMILY_NAMES[fam], code, saves_text(code), "Python, at a stop" if fam == HOST else "yes",
            arena, scalar,
            "yes" if name in NUMBER_FORWARD else "-"))
    return lines


# -- probing the public names -------------------------------------------------------

def _leaf(shape, low=0.5):
    n = int(np.prod(shape))
    return tg.tensor((np.arange(n, dtype=np.float64) * 0.1 + low).reshape(shape), requires_grad=True)


def _patterns():
    """Argument patterns, tried in order: (how the page shows the call, a function
    making fresh arguments)."""
    x = lambda: _leaf((3, 4))           # noqa: E731
    return [
        ("x", lambda: (x(),)),
        ("[x, x]", lambda: ([x(), x()],)),
        ("x, x", lambda: (x(), x())),
        ("x, x.T", lambda: (x(), _leaf((4, 3)))),
        ("x, v", lambda: (x(), _leaf((4,)))),
        ("b, b.mT", lambda: (_leaf((2, 3, 4)), _leaf((2, 4, 3)))),
        ("v, v", lambda: (_leaf((4,)), _leaf((4,)))),
        ("mask, x, x", lambda: (tg.tensor(np.arange(12).reshape(3, 4) % 2 == 0), x(), x())),
        ("x, 1", lambda: (x(), 1)),
        ("x, 0, 1", lambda: (x(), 0, 1)),
        ("x, (0, 1)", lambda: (x(), (0, 1))),
        ("x, 0, 1, 2", lambda: (x(), 0, 1, 2)),
        ("x, (4, 3)", lambda: (x(), (4, 3))),
        ("x, (2, 3, 4)", lambda: (x(), (2, 3, 4))),
        ("x, 0.5, 1.5", lambda: (x(), 0.5, 1.5)),
        ("x, labels", lambda: (x(), tg.tensor([0, 3, 1]))),
        ("m, m", lambda: (tg.tensor([True, False, True]), tg.tensor([True, True, False]))),
        ("m", lambda: (tg.tensor([True, False, True]),)),
        # gathers and scatters: an index along dim 1, a mask
        ("x, 1, idx", lambda: (x(), 1, tg.tensor([[0, 3], [1, 1], [2, 0]]))),
        ("x, 1, idx, src", lambda: (x(), 1, tg.tensor([[0, 3], [1, 2], [2, 0]]), _leaf((3, 2)))),
        ("x, 1, idx, src, 'amax'", lambda: (x(), 1, tg.tensor([[0, 3], [1, 1], [2, 0]]), _leaf((3, 2)), "amax")),
        ("x, 1, vidx", lambda: (x(), 1, tg.tensor([3, 0]))),
        ("x, 1, vidx, src", lambda: (x(), 1, tg.tensor([3, 0]), _leaf((3, 2)))),
        ("x, 1, vidx, 0.5", lambda: (x(), 1, tg.tensor([3, 0]), 0.5)),
        ("x, mask, 0.5", lambda: (x(), tg.tensor(np.arange(12).reshape(3, 4) % 2 == 0), 0.5)),
        ("x, mask, x", lambda: (x(), tg.tensor(np.arange(12).reshape(3, 4) % 2 == 0), x())),
        ("x, labels, w", lambda: (x(), tg.tensor([0, 3, 1]), _leaf((3,)))),
        # tg.linalg: square matrices (symmetric positive definite), a right-hand side
        ("A", lambda: (_spd(),)),
        ("A, B", lambda: (_spd(), _leaf((3, 2)))),
        ("A, 2", lambda: (_spd(), 2)),
        ("[A, A]", lambda: ([_spd(), _spd()],)),
        ("B, L", lambda: (_leaf((3, 2)), tg.tensor(np.linalg.cholesky(_spd()._data), requires_grad=True))),
        # complex tensors: a view of a (3, 4, 2) pair tensor; the pair tensor itself
        ("c", lambda: (tg.view_as_complex(_leaf((3, 4, 2))),)),
        ("p", lambda: (_leaf((3, 4, 2)),)),
        ("8", lambda: (8,)),
    ]


def _spd():
    a = np.arange(9.0).reshape(3, 3) * 0.1 + 0.5
    return tg.tensor(a @ a.T + 3 * np.eye(3), requires_grad=True)


def _first_tensor(out):
    if isinstance(out, tg.Tensor):
        return out
    if isinstance(out, (tuple, list)):
        for o in out:
            if isinstance(o, tg.Tensor):
                return o
    return None


def _entries_since(T, n0):
    ops = []
    for e in range(n0, T.n):
        code = struct.unpack_from("q", T.buf, e * _tape.ESIZE)[0]
        if family(code) != META:
            ops.append(OP_NAMES[code])
    return ops


def _call(call, args):
    """(result tensor, tape ops) of ``call(*args)``, or None when it fails."""
    inplace = getattr(call, "inplace", False)
    if inplace:
        if not isinstance(args[0], tg.Tensor) or args[0].dtype.kind != "f":
            return None
        args = (args[0] * 1.0,) + tuple(args[1:])      # (in-place on a non-leaf, before the count starts)
    T = _tape.current()
    n0 = T.n
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np_err = np.seterr(all="ignore")
        try:
            out = call(*args)
        except Exception:
            return None
        finally:
            np.seterr(**np_err)
    t = _first_tensor(out)
    if t is None:
        return None
    ops = _entries_since(T, n0) if _tape.current() is T else []
    return t, ops, t is args[0] and not inplace


def _replays(call, make):
    """Whether ``tg.compile`` replays the call (a second call with new values of the
    same signature), or why not.  A list argument is passed as its tensors (a
    compiled function takes tensors, arrays and plain values)."""
    inplace = getattr(call, "inplace", False)
    listed = isinstance(make()[0], list)

    def body(*a):
        if listed:
            a = (list(a),)
        if inplace:
            a = (a[0] * 1.0,) + tuple(a[1:])
        return call(*a)
    f = tg.compile(body)

    def args():
        a = make()
        return tuple(a[0]) if listed else a
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            f(*args())
            f(*args())
        except Exception as e:
            return "no (%s)" % type(e).__name__
    if f.stats.replays:
        return "yes"
    why = next(iter(f.why.values()), "")
    return "no: %s" % why.rstrip(".") if why else "no"


# Where the first pattern that works is not the usual call, the usual one is tried first.
PREFERRED = {"cat": "[x, x]", "concat": "[x, x]", "stack": "[x, x]", "clamp": "x, 0.5, 1.5",
             "clip": "x, 0.5, 1.5", "clamp_": "x, 0.5, 1.5", "cartesian_prod": "v, v",
             # (x, 3 x 4 of rank 2, has a last pivot that is zero or a rounding error by the
             # BLAS build: the page would change from machine to machine)
             "lu_factor": "A"}


def probe(call, name=""):
    patterns = _patterns()
    first = PREFERRED.get(name.rsplit(".", 1)[-1])
    patterns.sort(key=lambda p: p[0] != first)
    for shown, make in patterns:
        got = _call(call, make())
        if got is None:
            continue
        t, ops, same = got
        grad_fn = t.grad_fn.name() if t.grad_fn is not None else None
        r = {"args": shown, "ops": ops, "replay": "-"}
        if same:
            r["grad_fn"] = "(returns its input)"
        elif grad_fn is None:
            r["grad_fn"] = "not differentiable"
        else:
            r["grad_fn"] = "`%s`" % grad_fn
            r["replay"] = _replays(call, make)
        return r
    return None


def _summary(obj):
    doc = (obj.__dict__.get("__doc__") if inspect.isclass(obj) else inspect.getdoc(obj)) or ""
    doc = inspect.cleandoc(doc)
    first = doc.strip().split("\n\n")[0].replace("\n", " ").strip()
    return first.replace("|", "\\|")


def _public(ns):
    names = getattr(ns, "__all__", None)
    if names is None:
        names = [n for n in dir(ns) if not n.startswith("_")]
    out = []
    for n in sorted(names):
        obj = getattr(ns, n)
        mod = getattr(obj, "__module__", "") or ""
        if n in NOT_OPS or inspect.ismodule(obj) or not callable(obj) or not mod.startswith("tapegrad"):
            continue
        out.append((n, obj))
    return out


def op_rows(title, items, call_of):
    lines = ["", "## %s" % title, "",
             "| name | called with | grad_fn of the result | tape entries | replayed by `tg.compile` |",
             "|---|---|---|---|---|"]
    for label, obj in items:
        r = probe(call_of(obj), label)
        if r is None:
            lines.append("| `%s` | (not probed) | | | |" % label)
            continue
        ops = ", ".join("`%s`" % o for o in dict.fromkeys(r["ops"])) or "-"
        lines.append("| `%s` | `%s` | %s | %s | %s |" % (label, r["args"], r["grad_fn"], ops, r["replay"]))
    return lines


def listing(title, items):
    lines = ["", "## %s" % title, "", "| name | what it is |", "|---|---|"]
    for n, obj in items:
        lines.append("| `%s` | %s |" % (n, _summary(obj) or "-"))
    return lines


def generate():
    tg.manual_seed(0)
    tg.distributions        # (imported on first use: its host ops, the Gamma and Dirichlet draws, in the registry)
    functions = [(n, o) for n, o in _public(tg) if not inspect.isclass(o)]
    ops_fns = [(n, o) for n, o in functions if n not in CREATION | UTILITIES]
    methods = sorted(n for n in dir(tg.Tensor) if not n.startswith("_")
                     and n not in TENSOR_ATTRIBUTES | TENSOR_BOOKKEEPING)

    def method_call(name):
        def call(x, *rest):
            return getattr(x, name)(*rest)
        call.inplace = name.endswith("_")
        return call

    def operator_call(name):
        if name == "__setitem__":
            def setitem(x, *rest):
                x[0] = 0.0
                return x
            setitem.inplace = True
            return setitem
        if name == "__getitem__":
            return lambda x, *rest: x[1:, ::2]

        def call(x, *rest):
            return getattr(x, name)(*rest)
        call.inplace = name in ("__iadd__", "__isub__", "__imul__", "__itruediv__", "__ipow__")
        return call

    def module_call(cls):
        for ctor in ((), (4, 3), (1,)):
            try:
                m = cls(*ctor)
            except Exception:
                continue
            return lambda *a: m(*a)
        return lambda *a: None

    F = tg.nn.functional
    lines = [
        "# Supported operations",
        "",
        "<!-- Generated by docs/gen_ops.py from tapegrad's op registry and public names; "
        "do not edit (tests/test_docs.py checks it). -->",
        "",
        "This page is generated from tapegrad itself. Every public operation was called on small",
        "float64 example tensors (*called with*: `x` is a 3x4 tensor that requires grad, `x.T` a 4x3",
        "one, `v` a vector of 4, `b` a batch of 2x3x4 matrices, `mask` and `m` boolean tensors,",
        "`labels` class indices, `idx` (3x2) and `vidx` (a vector) indices along dim 1, `src` a 3x2",
        "tensor, `w` a vector of 3, `A` a 3x3 symmetric positive definite matrix, `B` a 3x2 one, `L` the",
        "Cholesky factor of `A`; a method is called on its first argument, a module is made with no",
        "arguments or `(4, 3)`). The columns say what that call did: the `grad_fn` of its result",
        "(the same names as PyTorch's), the tape entries it appended (the operations of the table",
        "at the end, which the compiled reverse sweep differentiates), and whether `tg.compile`",
        "replays it (\"no: ...\" gives the reason the call runs eagerly each time). \"(not probed)\"",
        "means none of the generator's example argument patterns fit the function; see its",
        "docstring in the [API reference](api.md).",
    ]
    lines += op_rows("Functions (`tg.*`)", ops_fns, lambda o: o)
    lines += op_rows("Tensor methods", [("Tensor." + n, n) for n in methods], method_call)
    lines += op_rows("Tensor operators", [("Tensor." + n, n) for n in OPERATORS], operator_call)
    lines += op_rows("`tg.nn.functional`", _public(F), lambda o: o)
    lines += op_rows("`tg.linalg`", [("linalg." + n, o) for n, o in _public(tg.linalg) if not inspect.isclass(o)],
                     lambda o: o)
    lines += op_rows("`tg.special`", [("special." + n, o) for n, o in _public(tg.special) if not inspect.isclass(o)],
                     lambda o: o)
    lines += op_rows("`tg.fft` (complex results: see [Complex tensors](complex.md))",
                     [("fft." + n, o) for n, o in _public(tg.fft) if not inspect.isclass(o)], lambda o: o)
    modules = [(n, o) for n, o in _public(tg.nn) if inspect.isclass(o) and n not in ("Module", "Parameter")]
    lines += op_rows("Modules (`tg.nn`), called on example inputs", modules, module_call)
    lines += ["", "## Tensor attributes and bookkeeping", "",
              ", ".join("`%s`" % n for n in sorted(TENSOR_ATTRIBUTES | TENSOR_BOOKKEEPING))
              + " (see [Tensors and autograd](autograd.md))."]
    lines += listing("Creation (`tg.*`)", [(n, o) for n, o in functions if n in CREATION])
    lines += listing("Utilities and classes (`tg.*`, `tg.nn`)",
                     [(n, o) for n, o in functions if n in UTILITIES]
                     + [(n, o) for n, o in _public(tg) if inspect.isclass(o)]
                     + [("nn." + n, o) for n, o in _public(tg.nn) if n in ("Module", "Parameter")])
    lines += listing("`tg.distributions` (compositions of the operations above)",
                     [("distributions." + n, o) for n, o in _public(tg.distributions) if n != "constraints"])
    lines += listing("Optimizers (`tg.optim`)", [(n, o) for n, o in _public(tg.optim) if inspect.isclass(o)])
    lines += listing("`tg.autograd`", [(n, o) for n, o in _public(tg.autograd) if n != "Tensor"])
    lines += listing("`tg.autograd.functional`", _public(tg.autograd.functional))
    lines += listing("`tg.func`", [("func." + n, o) for n, o in _public(tg.func)])
    lines += ["", "## Tape operations (the op registry)", "",
              "Every entry of the tape is one of these operations. *compiled reverse*: the family",
              "kernel of the compiled reverse sweep has a branch for it (\"Python, at a stop\": a host",
              "op, whose reverse runs in Python where the compiled sweep stops; the interpreted and the",
              "`create_graph` backward handle every operation too). *replay of arrays*: how a replay",
              "computes the entry once the compiled kernels are loaded (\"NumPy\": one NumPy call for",
              "this entry, the loop resumes after it). *replay of single numbers*: whether a tape of",
              "one-element float64 values with this entry replays in the compiled scalar loop.",
              "*single-number eager path*: computed as a Python float when every operand is one",
              "float64 number.", ""]
    lines += registry_table()
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 if the page differs from the generated one")
    p.add_argument("--page", default=OUT, help="the page to write or check (default: docs/ops.md)")
    args = p.parse_args(argv)
    text = generate()
    if args.check:
        try:
            with open(args.page, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != text:
            print("%s is out of date: run python docs/gen_ops.py" % os.path.relpath(args.page, ROOT),
                  file=sys.stderr)
            return 1
        return 0
    with open(args.page, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
