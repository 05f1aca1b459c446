"""tapegrad's modules sit on floors, and an import points down (docs/architecture.md).

The imports of every module, at module level and inside functions, are read with the
standard library's ``ast`` (nothing is imported).  ``FLOORS`` places each module on
its floor: an import may point to a lower floor, or sideways on the same floor (inside
``ops/`` only to an earlier module of ``OPS_ORDER``), never up, and no imports may form
a cycle.  The test fails on any import against that, naming the two modules and the line.
"""
import ast
import collections
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "tapegrad"

FLOORS = {
    "tapegrad._jit": 0,                 # Numba loading
    "tapegrad._private": 0,             # the checked directories tapegrad writes to and runs from
    "tapegrad._version": 0,
    # 1, the core: entry format, registry, per-thread state, the tape, the Tensor type
    "tapegrad.core": 1,
    "tapegrad.core.tape": 1,
    "tapegrad.core.tensor": 1,
    "tapegrad.core.random": 1,
    "tapegrad.core.registry": 1,         # (core/registry.py in the review's layout)
    "tapegrad.core.promotion": 1,        # dtype rules the Tensor type needs (infer_dtype)
    "tapegrad.core.dtypes": 1,           # PyTorch's spellings of a dtype in messages
    "tapegrad.core.descriptors": 1,        # slot addressing, strided descriptors (core/descriptors.py)
    "tapegrad.core.buffers": 1,          # kept buffers that tg.tensor's large copies reuse
    "tapegrad.core.quiet": 1,            # NumPy's floating-point warnings kept out of the ops
    # 2, the op families
    "tapegrad.ops": 2,
    "tapegrad.ops._args": 2,
    "tapegrad.ops._record": 2,
    "tapegrad.ops.rule_language": 2,    # what rules may call, for every back end; the one differentiator
    "tapegrad.ops._dual": 2,
    "tapegrad.ops.inplace": 2,
    "tapegrad.ops.shape": 2,
    "tapegrad.ops.elementwise": 2,
    "tapegrad.ops.reduce": 2,
    "tapegrad.ops.linalg": 2,
    "tapegrad.ops.gathers": 2,           # gathers and scatters, compositions of shape and elementwise kernels
    "tapegrad.ops.compose": 2,           # einsum, tensordot, cross, repeat_interleave, pad: compositions of recorded ops
    "tapegrad.ops.order": 2,             # sorting, selection, cummax/cummin, diff: compositions (gathers)
    "tapegrad.ops.host": 2,              # host ops: NumPy/LAPACK forward, reverse in Python between sweep segments
    # 3, generated and compiled kernels
    "tapegrad.kernels": 3,
    "tapegrad.kernels.codegen": 3,
    "tapegrad.kernels.sweep": 3,
    "tapegrad.kernels.forward": 3,
    "tapegrad.kernels.special": 3,      # SciPy's special functions for the kernels' rules
    "tapegrad.kernels.loops": 3,        # index maps, loop nests, shifted sums, compiling: the generated programs' planning
    # 4, backward passes and the autograd API
    "tapegrad.autograd": 4.5,           # its public names, above its modules
    "tapegrad.autograd.anomaly": 4,
    "tapegrad.autograd.api": 4,
    "tapegrad.autograd.differentiable": 4,
    "tapegrad.autograd.engine": 4,
    "tapegrad.autograd.functional": 4,
    "tapegrad.autograd.function": 4,     # tg.autograd.Function, a host op
    "tapegrad.autograd.grad_mode": 4,
    "tapegrad.autograd.gradcheck": 4,
    "tapegrad.autograd.grad_entry": 4,   # create_graph gradients of a scalar as one entry (registers into api)
    "tapegrad.autograd.graph": 4,
    "tapegrad.autograd.walk": 4,
    "tapegrad.autograd.tangent": 4,
    "tapegrad.autograd.tangent_program": 4,   # forward over reverse, compiled per tape structure
    "tapegrad._background": 4,          # the background compile the engine asks for
    # 5, the public functions and replay
    "tapegrad.functions": 5,
    "tapegrad.creation": 5,             # creation and random functions (over functions.where)
    "tapegrad.numeric": 5,              # cov, trapezoid, norm...: compositions of the functions
    "tapegrad.cuda": 5,                 # tg.cuda: no CUDA device
    "tapegrad.cuda.amp": 6,             # its deprecated amp spellings, over tg.amp
    "tapegrad.amp": 6,                  # autocast (changes nothing), GradScaler
    "tapegrad.accelerator": 5,          # tg.accelerator: none
    "tapegrad.backends": 5,             # tg.backends: CPU-only answers and inert flags
    "tapegrad.backends.cpu": 5,
    "tapegrad.backends.cuda": 5,
    "tapegrad.backends.cudnn": 5,
    "tapegrad.backends.mps": 5,
    "tapegrad.backends.mkl": 5,
    "tapegrad.backends.mkldnn": 5,
    "tapegrad.backends.openmp": 5,
    "tapegrad.onnx": 5,                 # importable; export raises
    "tapegrad._out": 5,                 # out=: the result copied into a given tensor
    "tapegrad.compat": 5,               # legacy tensor types, storage queries, as_strided, promote_types
    "tapegrad.autograd.variable": 4,    # the legacy Variable
    "tapegrad.serialization": 6,        # tg.save / tg.load
    "tapegrad.linalg": 5,               # tg.linalg: host ops (LAPACK) and compositions, on the public ops
    "tapegrad.complex_tensor": 5,       # complex tensors: views of real (..., 2) pair tensors
    "tapegrad.fft": 5,                  # tg.fft: host ops (pocketfft) on pair tensors
    "tapegrad.func": 6,                 # tg.func: torch.func's transforms over autograd.grad
    "tapegrad._vmap": 6,                # vmap: a call per index, the results stacked
    "tapegrad.replay": 5.5,             # its public names, above its modules
    "tapegrad.replay.session": 5,       # the recording observer, watched arguments, guards
    "tapegrad.replay.captured": 5,      # what a recorded call reads from outside its arguments: its guards
    "tapegrad.replay.forward": 5,       # the forward strategies, value containers
    "tapegrad.replay.fuse": 5,          # the fused replay: a tape compiled into generated loops
    "tapegrad.replay.replayed": 5,      # ReplayedTape and its backward plan
    "tapegrad.replay.recording": 5,     # Recording, the recording of one call
    "tapegrad.replay.compile": 5,       # tg.compile
    "tapegrad.replay.tapefile": 5,      # replay's file format
    "tapegrad.replay.record": 5,        # tg.record, RecordedTape, save/load
    # 6, built on the public API
    "tapegrad.nn": 6,
    "tapegrad.nn.functional": 6,
    "tapegrad.nn.modules": 6,
    "tapegrad.nn.parallel": 6,          # DataParallel (runs the module), DistributedDataParallel (raises)
    "tapegrad.nn.utils": 6,             # clip_grad_norm_, parameters_to_vector, rnn.pad_sequence
    "tapegrad.nn.utils.clip_grad": 6,
    "tapegrad.nn.utils.convert_parameters": 6,
    "tapegrad.nn.utils.rnn": 6,
    "tapegrad.nn.modules.module": 6,     # Module, hooks (torch.nn.modules.<kind>: one module per kind)
    "tapegrad.nn.modules._common": 6,
    "tapegrad.nn.modules.activation": 6,
    "tapegrad.nn.modules.container": 6,
    "tapegrad.nn.modules.conv": 6,
    "tapegrad.nn.modules.flatten": 6,
    "tapegrad.nn.modules.linear": 6,
    "tapegrad.nn.modules.loss": 6,
    "tapegrad.nn.modules.batchnorm": 6,
    "tapegrad.nn.modules.distance": 6,
    "tapegrad.nn.modules.fold": 6,
    "tapegrad.nn.modules.instancenorm": 6,
    "tapegrad.nn.modules.pixelshuffle": 6,
    "tapegrad.nn.modules.dropout": 6,
    "tapegrad.nn.modules.normalization": 6,
    "tapegrad.nn.modules.padding": 6,
    "tapegrad.nn.modules.pooling": 6,
    "tapegrad.nn.modules.rnn": 6,
    "tapegrad.nn.modules.sparse": 6,
    "tapegrad.nn.modules.transformer": 6,
    "tapegrad.nn.modules.upsampling": 6,
    "tapegrad.nn.parameter": 6,
    "tapegrad.nn.init": 6,
    "tapegrad.nn._reduction": 6,         # (nn.functional's parts, which it re-exports)
    "tapegrad.nn._activations": 6,
    "tapegrad.nn._conv": 6,
    "tapegrad.nn._host": 6,
    "tapegrad.nn._sparse": 6,
    "tapegrad.nn._norm": 6,
    "tapegrad.nn._pooling": 6,
    "tapegrad.nn._interp": 6,
    "tapegrad.nn._attention": 6,
    "tapegrad.nn._rnn": 6,
    "tapegrad.nn._ctc": 6,              # the layers' host ops: NumPy forward, both reverses
    "tapegrad.nn._losses": 6,
    "tapegrad.optim": 6,
    "tapegrad.optim.optimizer": 6,      # the Optimizer base class, shared arithmetic
    "tapegrad.optim.adaptive": 6,       # RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, SparseAdam
    "tapegrad.optim.lbfgs": 6,
    "tapegrad.optim.lr_scheduler": 6,
    "tapegrad.profile": 6,
    "tapegrad.utils": 6,                # tg.utils.data: datasets, samplers, DataLoader
    "tapegrad.utils.data": 6,
    "tapegrad.utils.data.dataset": 6,
    "tapegrad.utils.data.sampler": 6,
    "tapegrad.utils.data._collate": 6,
    "tapegrad.utils.data.dataloader": 6,
    "tapegrad.utils.data.distributed": 6,
    "tapegrad.special": 6,              # tg.special, over the functions and nn.functional
    "tapegrad.distributions": 6,        # tg.distributions, over the public functions and nn.functional
    "tapegrad.distributions.constraints": 6,
    "tapegrad.distributions.utils": 6,
    "tapegrad.distributions._implicit": 6,
    "tapegrad.distributions.distribution": 6,
    "tapegrad.distributions.continuous": 6,
    "tapegrad.distributions.discrete": 6,
    "tapegrad.distributions.multivariate": 6,
    "tapegrad.distributions.independent": 6,
    "tapegrad.distributions.kl": 6,
    "tapegrad.distributions.mvn": 6,
    "tapegrad.distributions._linalg": 6,   # Cholesky and triangular solves as compositions, for mvn
    "tapegrad": 7,                      # the package's public names
    "tapegrad.__main__": 8,             # python -m tapegrad
    "tapegrad.distributed": 8,          # torch.distributed's answers; hands out _dask_parallel's names
    "tapegrad._dask_parallel": 8,       # DataParallel over Dask, over the public tg.record
}

# Sideways inside ops/, an import points to an earlier module of this list.
OPS_ORDER = ["tapegrad.ops._args", "tapegrad.ops._record", "tapegrad.ops.rule_language", "tapegrad.ops._dual", "tapegrad.ops.inplace", "tapegrad.ops.shape",
             "tapegrad.ops.elementwise", "tapegrad.ops.reduce", "tapegrad.ops.linalg",
             "tapegrad.ops.gathers", "tapegrad.ops.compose", "tapegrad.ops.order", "tapegrad.ops.host"]


def module_name(path, root):
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root):
    """``{(importer, imported): [(line, inside a function), ...]}`` for the modules
    under the package directory ``root``, and the set of all its modules."""
    files = {module_name(p, root): p for p in root.rglob("*.py") if "_generated" not in p.parts}
    edges = collections.defaultdict(list)
    for mod, path in files.items():
        pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]

        def add(target, node, local):
            if target in files and target != mod:
                edges[(mod, target)].append((node.lineno, local))
                return True
            return False

        def walk(node, local):
            for ch in ast.iter_child_nodes(node):
                if isinstance(ch, ast.ImportFrom):
                    base = (pkg[:len(pkg) - ch.level + 1] if ch.level else []) + ([ch.module] if ch.module else [])
                    for a in ch.names:      # a module imported from a package, else the package itself
                        add(".".join(base + [a.name]), ch, local) or add(".".join(base), ch, local)
                elif isinstance(ch, ast.Import):
                    for a in ch.names:
                        add(a.name, ch, local)
                walk(ch, local or isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
        walk(ast.parse(path.read_text(), str(path)), False)
    return dict(edges), set(files)


def components(pairs):
    """The strongly connected components of more than one module (Tarjan)."""
    graph = collections.defaultdict(set)
    for a, b in pairs:
        graph[a].add(b)
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while v not in comp:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def violations(edges, floors, ops_order):
    """The imports that point up a floor, against ``ops_order`` inside ops/, or
    sideways in a cycle of sideways imports.  None left means no cycle either: a
    cycle without an upward import stays on one floor."""
    rank = {m: i for i, m in enumerate(ops_order)}
    sideways = [(a, b) for a, b in edges if floors[a] == floors[b] and not rank.get(b, -1) > rank.get(a, -1)]
    comp_of = {m: i for i, comp in enumerate(components(sideways)) for m in comp}
    bad = {}
    for (a, b), where in edges.items():
        if floors[b] > floors[a]:
            why = "up from floor %g to %g" % (floors[a], floors[b])
        elif a in rank and b in rank and rank[b] > rank[a]:
            why = "against the order of ops/"
        elif floors[b] == floors[a] and a in comp_of and comp_of.get(b) == comp_of[a]:
            why = "sideways in a cycle"
        else:
            continue
        bad[(a, b)] = "%s imports %s (%s; line %s)" % (a, b, why, ", ".join(
            "%d%s" % (line, " in a function" if local else "") for line, local in sorted(set(where))))
    return bad


EDGES, MODULES = import_graph(PACKAGE)


def test_every_module_has_a_floor():
    assert MODULES - set(FLOORS) == set(), "give the new module a floor in FLOORS"
    assert set(FLOORS) - MODULES == set(), "a module of FLOORS is gone: remove it"


def test_only_the_package_facade_imports_replay():
    importers = {a for a, b in EDGES if b.startswith("tapegrad.replay") and not a.startswith("tapegrad.replay")}
    # (it also registers nn's OptimizedModule and label predicate into replay/)
    assert importers == {"tapegrad"}, "the core reports to a recording through state().rec, not by import"


def test_no_upward_import_and_no_cycle():
    bad = violations(EDGES, FLOORS, OPS_ORDER)
    assert not bad, "imports against the floors:\n" + "\n".join(sorted(bad.values()))


def test_module_level_imports_have_no_cycle():
    module_level = [e for e, where in EDGES.items() if any(not local for _, local in where)]
    assert components(module_level) == []


def test_no_cycle_at_all():
    assert components(list(EDGES)) == []


def test_import_graph_reads_every_kind_of_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import low\nfrom .sub import mid as m\n")
    (pkg / "low.py").write_text("import os\n\ndef f():\n    from .sub.mid import g\n    return g\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "mid.py").write_text("from .. import low\nimport pkg.sub\n\nclass K:\n"
                                        "    def m(self):\n        from ..sub import top\n")
    (pkg / "sub" / "top.py").write_text("x = lambda: __import__('os')\nfrom pkg import sub\n")
    edges, modules = import_graph(pkg)
    assert modules == {"pkg", "pkg.low", "pkg.sub", "pkg.sub.mid", "pkg.sub.top"}
    assert edges == {
        ("pkg", "pkg.low"): [(1, False)],
        ("pkg", "pkg.sub.mid"): [(2, False)],
        ("pkg.low", "pkg.sub.mid"): [(4, True)],
        ("pkg.sub.mid", "pkg.low"): [(1, False)],
        ("pkg.sub.mid", "pkg.sub"): [(2, False)],
        ("pkg.sub.mid", "pkg.sub.top"): [(6, True)],
        ("pkg.sub.top", "pkg.sub"): [(2, False)],
    }
    assert components(edges) == [{"pkg.low", "pkg.sub.mid"}]
    floors = {"pkg.low": 0, "pkg.sub": 1, "pkg.sub.mid": 1, "pkg.sub.top": 1, "pkg": 2}
    bad = violations(edges, floors, [])
    assert set(bad) == {("pkg.low", "pkg.sub.mid")}
    assert bad[("pkg.low", "pkg.sub.mid")] == ("pkg.low imports pkg.sub.mid (up from floor 0 to 1; "
                                              "line 4 in a function)")


@pytest.mark.parametrize("source, expected", [("import tapegrad.replay\n", True),
                                              ("def f():\n    from tapegrad import replay\n", True),
                                              ("from tapegrad.core.tape import state\n", False)])
def test_a_replay_import_would_be_found(tmp_path, source, expected):
    pkg = tmp_path / "tapegrad"
    pkg.mkdir()
    (pkg / "core").mkdir()
    for name in ("__init__", "replay", "core/__init__", "core/tape", "core/tensor"):
        (pkg / (name + ".py")).write_text("")
    (pkg / "core/tensor.py").write_text(source)
    edges, _ = import_graph(pkg)
    assert (("tapegrad.core.tensor", "tapegrad.replay") in edges) == expected


# -- the recording observer: how the core reports to a recording without importing it ---
def _protocol():
    from tapegrad.core.tape import RecordingObserver
    return {k for k in vars(RecordingObserver) if not k.startswith("_")}


def test_the_core_calls_only_the_observer_protocol():
    # every ``rec.<name>`` outside replay names a method (or ``tape``) of the protocol
    used = collections.defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        if "_generated" in path.parts or "replay" in path.relative_to(PACKAGE).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "rec":
                used[node.attr].add(path.name)
    assert set(used) - _protocol() == set()
    assert {"made", "adopted", "refuse", "read", "really_requires_grad", "compared", "index", "gathered",
            "picked", "ordered", "labels"} <= set(used)


def test_the_replay_session_implements_the_whole_protocol():
    from tapegrad.replay import _Session
    from tapegrad.core.tape import RecordingObserver
    methods = {k for k in _protocol() if callable(getattr(RecordingObserver, k))}
    assert len(methods) == 11
    assert {k for k in methods if getattr(_Session, k) is getattr(RecordingObserver, k)} == set()


class _Log:
    """An observer that notes what the library tells it."""
    def __init__(self, tape):
        self.tape = tape
        self.events = []

    def __getattr__(self, name):
        from tapegrad.core.tape import RecordingObserver
        default = getattr(RecordingObserver(), name)

        def note(*args):
            self.events.append((name,) + args)
            return default(*args)
        return note


@pytest.fixture
def observed():
    from tapegrad.core import tape
    st = tape.state()
    saved = st.rec, st.tape
    log = _Log(tape.Tape())
    st.rec, st.tape = log, log.tape
    tape.recording[0] += 1
    try:
        yield log
    finally:
        tape.recording[0] -= 1
        st.rec, st.tape = saved


def _names(log):
    return [e[0] for e in log.events]


def test_every_call_site_reports_to_the_observer(observed):
    import numpy as np
    import tapegrad as tg
    x = tg.tensor([1.0, -2.0, 3.0])
    assert _names(observed) == []                       # made from outside data: not told
    y = x * 2.0                                          # no grad: made off the tape
    assert _names(observed) == ["made"] and observed.events[0][1] is y
    observed.events.clear()
    m = y > 0
    assert _names(observed) == ["made", "compared"]
    assert observed.events[1][1:] == (np.greater, y, observed.events[1][3], m)
    assert observed.events[1][3].dtype == np.float64 and observed.events[1][3] == 0   # the number, as an array
    observed.events.clear()
    assert m.tolist() == [True, False, True]
    assert bool(m[0]) is True
    assert x[1].item() == -2.0
    assert [e[0] for e in observed.events if e[0] != "made"] == ["read", "read", "read"]
    assert [e[2].tolist() for e in observed.events if e[0] == "read"] == [[True, False, True], True, -2.0]
    observed.events.clear()
    (~m, m & m)
    assert [e[1] for e in observed.events if e[0] == "compared"] == [np.invert, np.bitwise_and]

    w = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    observed.events.clear()
    z = w * 2.0
    assert observed.events == [("adopted", w._slot, w)]
    assert w._slot >= 0 and w._tape_id == observed.tape.id
    observed.events.clear()
    with pytest.raises(RuntimeError, match="Can't call numpy"):    # the plain observer: it really requires grad
        w.numpy()
    assert _names(observed) == ["read", "really_requires_grad"]

    observed.events.clear()
    k = tg.tensor([2, 0])
    g = z[k]
    assert _names(observed)[:1] == ["index"] and observed.events[0][1] is k
    gathered = [e for e in observed.events if e[0] == "gathered"]
    assert len(gathered) == 1 and gathered[0][1] is g and gathered[0][2] == (3,)
    assert [a.tolist() for a in gathered[0][3]] == [[2, 0]]
    assert g.tolist() == [6.0, 2.0]

    observed.events.clear()
    values, indices = tg.max(z, 0)
    picked = [e for e in observed.events if e[0] == "picked"]
    assert len(picked) == 1 and picked[0][1] is z and picked[0][2] is values and picked[0][3:] == (0, False, True)

    observed.events.clear()
    logp = tg.log_softmax(tg.tensor([[1.0, 2.0, 3.0], [1.0, 0.0, 0.0]], requires_grad=True), 1)
    target = tg.tensor([2, 0])
    tg.nn.functional.nll_loss(logp, target, ignore_index=1)
    labels = [e for e in observed.events if e[0] == "labels"]
    assert len(labels) == 1 and labels[0][1] is target
    flags = labels[0][2]            # nn passes its predicate: (any label ignored, any out of range)
    assert flags(np.array([2, 0])) == (False, False)
    assert flags(np.array([1, 0])) == (True, False)
    assert flags(np.array([3, 0])) == (False, True)

    observed.events.clear()
    tg.randn(2)
    assert observed.events[-1] == ("refuse", "it draws random numbers (a replay would reuse them)")


def test_no_observer_no_report():
    # while no thread records, the call sites stay silent even with an observer set
    from tapegrad.core import tape
    import tapegrad as tg
    st = tape.state()
    saved = st.rec
    st.rec = log = _Log(None)
    try:
        assert tape.recording[0] == 0
        x = tg.tensor([1.0, 2.0])
        ((x * 2.0) > 1).tolist()
        assert log.events == []
    finally:
        st.rec = saved


def test_recording_leaves_tensor_construction_alone():
    import tapegrad as tg
    from tapegrad.core.tensor import Tensor
    wrap, const = vars(Tensor)["_wrap"], vars(Tensor)["_const"]
    seen = []

    @tg.compile
    def f(x):
        seen.append((vars(Tensor)["_wrap"], vars(Tensor)["_const"]))
        return (x * 2.0).sum()

    x = tg.tensor([1.0, 2.0], requires_grad=True)
    f(x).backward()
    assert seen == [(wrap, const)]
    assert x.grad.tolist() == [2.0, 2.0]


# -- grad_fn: the core holds the slot, autograd/graph.py fills it -------------------------
def test_grad_fn_works_after_import_tapegrad_alone():
    import subprocess
    import sys
    code = ("import sys, tapegrad as tg\n"
            "x = tg.tensor([1.0, 2.0], requires_grad=True)\n"
            "y = (x * x).sum()\n"
            "print(type(y.grad_fn).__name__, type(y.grad_fn.next_functions[0][0]).__name__,\n"
            "      y.grad_fn.next_functions[0][0].next_functions[0][0].name(), x.grad_fn)\n"
            "print('tapegrad.autograd.graph' in sys.modules, 'numba' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent).stdout.split()
    assert out == ["SumBackward0", "MulBackward0", "torch::autograd::AccumulateGrad", "None", "True", "False"]
    import importlib
    from tapegrad.autograd import graph
    assert importlib.import_module("tapegrad.core.tensor").NODE_FOR is graph.node_for    # (tg.tensor is the function)
