"""The op records: every row of the elementwise table is checked at import (an
error names the op and the missing or unknown piece, so no compiled path is
silently switched off), every family registers its rules in the registry, and
every opcode of the registry is exercised by the op tests (tests/test_ops.py, and
tests/test_linalg.py for the host ops)."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import grad_entry
from tapegrad.core import tape
from tapegrad.kernels import codegen
from tapegrad.ops import elementwise, linalg, reduce, shape
from tapegrad.ops.elementwise import Binary, Unary
from tapegrad.core.registry import (FAMILY_NAMES, FAMILY_RULES, META, OP_NAMES, OPCODES, FamilyRules,
                                    OpDefinitionError, family)

import test_autograd_function
import test_complex_fft  # noqa: E402
from harness import backward
import test_linalg
import test_nn_functional_layers
import test_ops

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- the check of an elementwise row ------------------------------------------------
def test_every_row_of_the_table_passes_the_check():
    for op in elementwise.UNARY_OPS + elementwise.BINARY_OPS:
        assert codegen.check_row(op) <= codegen._MATH


def test_a_rule_calling_an_unknown_function_names_the_op_and_the_function():
    # radians is a math function (the kernels would compile) but no function of the rule language:
    # create_graph, forward mode and the Hessian programs could not run it
    row = Unary("sind", "SindBackward0", np.sin, "g * cos(radians(x))", "sin(radians(x))")
    with pytest.raises(OpDefinitionError, match=r"^elementwise op 'sind': its reverse rule 'g \* cos\(radians\(x\)\)' "
                                                 r"calls radians\(\), which is not a function of the rule language"):
        codegen.check_row(row)
    # (expm1: an op of the table, a NumPy and a math function, but no function rules may call)
    row = Binary("hyp", "HypBackward0", np.hypot, "g * a / y", "g * expm1(b)", "hypot(a, b)")
    with pytest.raises(OpDefinitionError, match=r"^elementwise op 'hyp': its reverse rule for b 'g \* expm1\(b\)' "
                                                 r"calls expm1\(\), which is not a function of the rule language"):
        codegen.check_row(row)


def test_a_missing_scalar_forward_names_the_op():
    row = Binary("hypot", "HypotBackward0", np.hypot, "g * a / y", "g * b / y", None)
    with pytest.raises(OpDefinitionError, match=r"^elementwise op 'hypot': its one-float forward \(scalar\) is "
                                                 r"missing"):
        codegen.check_row(row)


def test_a_scalar_forward_calling_an_unknown_function_names_it():
    row = Binary("hypot", "HypotBackward0", np.hypot, "g * a / y", "g * b / y", "hypotenuse(a, b)")
    with pytest.raises(OpDefinitionError, match=r"^elementwise op 'hypot': its one-float forward \(scalar\) "
                                                 r"'hypotenuse\(a, b\)' calls hypotenuse\(\), which the compiled "
                                                 r"kernels do not define"):
        codegen.check_row(row)
    row = Unary("trunc", "TruncBackward0", np.trunc, "0.0 * g", "np.trunk(x)")
    with pytest.raises(OpDefinitionError, match=r"^elementwise op 'trunc': .* calls np\.trunk, which NumPy does not"):
        codegen.check_row(row)


def test_a_rule_reading_another_kinds_variable_or_not_parsing_names_it():
    with pytest.raises(OpDefinitionError, match=r"^elementwise op 'twice': its reverse rule 'g \* a' reads 'a', "
                                                 r"which is not one of g, x, y, p, q$"):
        codegen.check_row(Unary("twice", "MulBackward0", np.add, "g * a", "x + x"))
    with pytest.raises(OpDefinitionError, match=r"^elementwise op 'twice': its one-float forward \(scalar\) 'y \+ y' "
                                                 r"reads 'y', which is not one of x, p, q$"):
        codegen.check_row(Unary("twice", "MulBackward0", np.add, "g * 2.0", "y + y"))
    # NumPy is the compiled kernels' name, not the differentiable reverse's: a reverse rule cannot use it
    with pytest.raises(OpDefinitionError, match=r"^elementwise op 'trunc': its reverse rule 'g \* np.zeros\(1\)' reads "
                                                 r"'np', which is not one of g, x, y, p, q$"):
        codegen.check_row(Unary("trunc", "TruncBackward0", np.trunc, "g * np.zeros(1)", "np.trunc(x)"))
    with pytest.raises(OpDefinitionError, match=r"^elementwise op 'twice': its reverse rule 'g \*' is not a Python "
                                                 r"expression"):
        codegen.check_row(Unary("twice", "MulBackward0", np.add, "g *", "x + x"))


def test_the_generated_math_import_is_built_from_the_rows(monkeypatch):
    line = codegen.math_import()
    names = set(line.split("import ")[1].split("  #")[0].split(", "))
    assert {"atan2", "cos", "sin", "exp", "log", "sqrt", "tanh"} <= names and "radians" not in names
    assert names <= codegen._MATH
    # a row whose one-float forward calls a math function brings it into the import
    row = Unary("sind", "SindBackward0", np.sin, "g * 0.017453292519943295 * cos(x * 0.017453292519943295)",
                "sin(radians(x))")
    monkeypatch.setattr(codegen, "ALL_UNARY", elementwise.ALL_UNARY + [row])
    assert "radians" in codegen.math_import()
    with open(os.path.join(codegen._writable_dir(), "elementwise_kernels.py")) as fh:
        assert line in fh.read().splitlines()      # (the module the kernels import)


def _import_with_edit(tmp_path, relpath, old, new):
    """``import tapegrad`` in a fresh interpreter, from a copy of the package whose
    file ``relpath`` has ``old`` replaced by ``new``."""
    dst = tmp_path / "tapegrad"
    shutil.copytree(os.path.join(ROOT, "tapegrad"), dst,
                    ignore=shutil.ignore_patterns("__pycache__", "_generated", "*.nbi", "*.nbc"))
    p = dst / relpath
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new, 1))
    env = dict(os.environ, PYTHONPATH=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-c", "import tapegrad"], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path), timeout=120)


def test_import_fails_naming_the_op_when_a_row_names_an_unknown_function(tmp_path):
    copy_row = 'Unary("copy",     "CloneBackward0",   np.copy,      "g",                    "x"),'
    r = _import_with_edit(tmp_path, os.path.join("ops", "elementwise.py"), copy_row,
                          copy_row + '\n    Unary("sind", "SindBackward0", np.sin, "g * cos(radians(x))", "sin(x)"),')
    assert r.returncode != 0
    assert ("tapegrad.core.registry.OpDefinitionError: elementwise op 'sind': its reverse rule 'g * cos(radians(x))' "
            "calls radians()" in r.stderr)


def test_import_fails_naming_the_op_when_its_scalar_forward_is_missing(tmp_path):
    r = _import_with_edit(tmp_path, os.path.join("ops", "elementwise.py"), '"-g * a / (b * b)", "a / b",',
                          '"-g * a / (b * b)", None,')
    assert r.returncode != 0
    assert "OpDefinitionError: elementwise op 'div': its one-float forward (scalar) is missing" in r.stderr


def test_import_fails_naming_a_reduce_op_without_its_differentiable_reverse(tmp_path):
    r = _import_with_edit(tmp_path, os.path.join("ops", "reduce.py"), "@differentiable(CUMSUM)\n", "")
    assert r.returncode != 0
    assert "OpDefinitionError: reduce op 'cumsum': no differentiable reverse (@differentiable)" in r.stderr


# -- the families' rules -------------------------------------------------------------
def test_every_family_registers_its_rules_once():
    assert sorted(FAMILY_RULES) == [f for f in range(len(FAMILY_NAMES)) if f != META]
    for fam, rules in FAMILY_RULES.items():
        assert isinstance(rules, FamilyRules)
        assert callable(rules.differentiable_reverse) and callable(rules.replay_rule)
        assert callable(rules.compiled_forward) and isinstance(rules.scalar_replay, frozenset)
    assert FAMILY_RULES[family(OPCODES["cumsum"])].replay_rule is reduce.replay_rule
    assert FAMILY_RULES[family(OPCODES["matmul"])].differentiable_reverse is linalg.differentiable_reverse
    assert FAMILY_RULES[family(OPCODES["gather"])].replay_rule is shape.replay_rule
    assert FAMILY_RULES[family(OPCODES["atan2"])].differentiable_reverse is elementwise.binary_differentiable_reverse
    with pytest.raises(OpDefinitionError, match="the reduce family registered twice"):
        tg.core.registry.register_family(family(OPCODES["sum"]), FAMILY_RULES[family(OPCODES["sum"])])


def test_every_reduce_op_has_its_rules_and_declared_saves():
    # (declare numbers the kernels in order: the indices are the branches of reduce_reverse)
    assert set(reduce._DIFFERENTIABLE) == set(reduce._REPLAY) == set(reduce._FORWARD) == set(reduce.CODES) \
        == set(range(len(reduce.CODES)))
    assert reduce.PER_ROW == {reduce.SOFTMAX, reduce.LOG_SOFTMAX, reduce.CUMSUM, reduce.CUMPROD, reduce.LOGCUMSUMEXP}


# -- every opcode is exercised by the op tests ---------------------------------------
def _opcodes(fn, *args):
    T = tape.current()
    n0 = T.n
    fn(*args)
    ints, _ = T.arrays()
    return {int(op) for op in ints[n0:T.n, tape.OP]}


def _served_gradient_opcodes():
    """The opcode of a create_graph gradient served as one entry (autograd/grad_entry.py;
    tests/test_grad_entry.py checks its values), forced to serve at the second call."""
    if os.environ.get("TAPEGRAD_INTERPRET") == "always":
        return set()
    from tapegrad import _jit
    from tapegrad.autograd import tangent_program
    _jit.load()
    saved = grad_entry.OBSERVE, tangent_program.MODE[0], tangent_program.COMPILE_AFTER
    grad_entry.OBSERVE, tangent_program.MODE[0], tangent_program.COMPILE_AFTER = 1, "now", 1
    try:
        for _ in range(3):
            x = test_ops.leaf(4)
            g, = tg.autograd.grad((x ** 3).sum(), x, create_graph=True)
            g.sum().backward()
    finally:
        grad_entry.OBSERVE, tangent_program.MODE[0], tangent_program.COMPILE_AFTER = saved
    return {int(g._tape.field(g._slot, tape.OP))}


def test_every_registry_opcode_is_in_the_op_tests():
    seen = set()
    for fn, kw in test_ops.UNARY.values():
        seen |= _opcodes(fn, test_ops.leaf(3, 4, **kw))
    for fn, kw in test_ops.BINARY.values():
        seen |= _opcodes(fn, test_ops.leaf(3, 4, **kw), test_ops.leaf(3, 4, **kw))
    for fn in test_ops.REDUCTIONS.values():
        seen |= _opcodes(fn, test_ops.leaf(2, 3, 4))
    for fn in test_ops.SHAPE_OPS.values():
        seen |= _opcodes(fn, test_ops.leaf(2, 3, 4))
        x = test_ops.leaf(2, 3, 4)         # (test_shape_gradgradcheck: their differentiable reverse)
        seen |= _opcodes(lambda: tg.autograd.grad((fn(x) * x.sum()).sum(), x, create_graph=True))
    seen |= _opcodes(test_ops.grad_of_cube, test_ops.leaf(4))
    for sa, sb in test_ops.MATMUL:
        seen |= _opcodes(lambda a, b: a @ b, test_ops.leaf(*sa), test_ops.leaf(*sb))
    seen |= _opcodes(test_ops.setitem_fn, test_ops.leaf(3, 4), test_ops.leaf(4))
    seen |= _opcodes(test_ops.inplace_fn, test_ops.leaf(3, 4))
    for fn, _, arrays in test_linalg.CASES.values():       # the host ops (tg.linalg)
        seen |= _opcodes(fn, *[test_linalg.leaf(a) for a in arrays])
    seen |= _opcodes(test_autograd_function.TG[0].apply, test_ops.leaf(3))     # tg.autograd.Function
    for f, shapes in test_complex_fft.CASES.values():      # complex tensors, tg.fft, linalg.eig (host ops)
        seen |= _opcodes(lambda *xs, f=f: f(tg, *xs), *[test_ops.leaf(*s) for s in shapes])
    a = test_ops.leaf(3) * 0 + 2.0              # (distributions: the Gamma draw and its derivative's entry,
    seen |= _opcodes(lambda: tg.autograd.grad(tg.distributions.Gamma(a, 1.0).rsample().sum(), a,
                                              create_graph=True))
    seen |= _opcodes(lambda: tg.distributions.Dirichlet(a).rsample())      # the Dirichlet draw)
    for fn in test_nn_functional_layers.opcode_programs():       # tg.nn's entries (host ops and rows)
        seen |= _opcodes(fn)
    seen |= _served_gradient_opcodes()
    ops = {code for code in OP_NAMES if family(code) != META}
    if os.environ.get("TAPEGRAD_INTERPRET") == "always":
        ops.discard(grad_entry._GRAD_OF.code)      # (it serves compiled backward passes only)
    missing = sorted(OP_NAMES[code] for code in ops - seen)
    assert not missing, "opcodes no table of tests/test_ops.py exercises: %s" % ", ".join(missing)


# -- every kernel branch: the compiled reverse against the interpreted one ---------------
KERNEL_FAMILIES = ("unary", "binary", "unary2", "binary2", "reduce", "shape", "linalg")


def _kernel_cases():
    """(name, function, input arrays) of the op tests' tables: together they record every
    opcode a family kernel has a branch for (the scatters through a second derivative)."""
    r = np.random.default_rng(7)

    def arrays(*shapes, lo=-2.0, hi=2.0, positive=False, away=0.0):
        out = []
        for shape in shapes:
            a = r.uniform(lo, hi, size=shape)
            if positive:
                a = np.abs(a) + 0.5
            if away:
                a = np.where(np.abs(a) < away, a + np.sign(a + 1e-9) * away * 2, a)
            out.append(a)
        return out
    for name, (fn, kw) in test_ops.UNARY.items():
        yield "unary " + name, fn, arrays((3, 4), **kw)
    for name, (fn, kw) in test_ops.BINARY.items():
        yield "binary " + name, fn, arrays((3, 4), (3, 4), **kw)
    for name, fn in test_ops.REDUCTIONS.items():
        yield "reduce " + name, fn, arrays((2, 3, 4))
    for name, fn in test_ops.SHAPE_OPS.items():
        yield "shape " + name, fn, arrays((2, 3, 4))
        yield "shape " + name + " (its reverse)", \
            lambda x, fn=fn: tg.autograd.grad((fn(x) * x.sum()).sum(), x, create_graph=True)[0], arrays((2, 3, 4))
    for sa, sb in test_ops.MATMUL:
        yield "matmul %s @ %s" % (sa, sb), lambda a, b: a @ b, arrays(sa, sb)
    yield "copy (the gradient backward(create_graph=True) leaves in .grad)", test_ops.grad_of_cube, arrays((4,))
    import test_nn_activations_losses as acts       # (tg.nn's rows of the second elementwise table)
    for name, fn in acts.ACT:
        yield "nn " + name, lambda x, fn=fn: fn(tg.nn.functional, x), arrays((2, 4, 3))
    yield "setitem", test_ops.setitem_fn, arrays((3, 4), (4,))
    yield "in place", test_ops.inplace_fn, arrays((3, 4))


def _gradients(fn, arrays, mode, opcodes=None):
    with backward(mode):
        xs = [tg.tensor(a, requires_grad=True) for a in arrays]
        out = fn(*xs)
        if opcodes is not None:
            ints, _ = out._tape.arrays()
            opcodes |= {int(c) for c in ints[:, tape.OP]}
        w = np.random.default_rng(3).uniform(0.5, 1.5, out.shape)
        (out * tg.tensor(w)).sum().backward()
        return [None if x.grad is None else x.grad.detach().numpy() for x in xs]


@pytest.mark.skipif(os.environ.get("TAPEGRAD_INTERPRET") == "always",
                    reason="compares the compiled reverse with the interpreted one (this run interprets both)")
def test_every_kernel_branch_matches_the_interpreted_reverse():
    """Every op a family kernel has a branch for, through the compiled sweep and the
    interpreted walk: the same gradients.  A branch missing from a family kernel makes
    the compiled backward raise, naming the op (``engine.missing_kernel``)."""
    seen, failures = set(), []
    for name, fn, arrays in _kernel_cases():
        compiled = _gradients(fn, arrays, "compiled", seen)
        interpreted = _gradients(fn, arrays, "interpreted")
        for c, i in zip(compiled, interpreted):
            if (c is None) != (i is None) or (c is not None and not np.allclose(c, i, rtol=1e-10, atol=1e-12,
                                                                                  equal_nan=True)):
                failures.append(name)
    assert not failures, "the compiled reverse differs from the interpreted one: %s" % ", ".join(failures)
    kernels = {code for code in OP_NAMES if FAMILY_NAMES[family(code)] in KERNEL_FAMILIES}
    missing = sorted(OP_NAMES[c] for c in kernels - seen)
    assert not missing, "ops of the family kernels no case records: %s" % ", ".join(missing)


def test_a_kernel_index_without_its_branch_is_named():
    """The loud default of the family kernels: an index no branch handles fills the adjoint
    with NaN and reports False, and the sweep's caller raises naming the op."""
    from tapegrad import _jit
    from tapegrad.autograd import engine
    _jit.load()
    dx = np.zeros(3)
    assert not reduce.reduce_reverse(63, np.ones(1), np.ones(3), np.ones(1), dx, np.array([1, 0, 3, 0]), 0, 1, 0.0)
    assert np.isnan(dx).all()
    dx = np.zeros(3)
    assert not shape.shape_reverse(63, np.ones(3), dx, np.zeros(0), np.zeros(1, np.int64), 0, np.zeros(1, np.int64),
                                   np.zeros(1, np.int64), np.zeros(1), np.zeros(1, np.int64))
    assert np.isnan(dx).all()
    da, db = np.zeros(4), np.zeros(4)
    assert not linalg.linalg_reverse(5, np.ones(4), np.ones(4), np.ones(4), da, db, np.zeros(6, np.int64), 0)
    assert np.isnan(da).all() and np.isnan(db).all()
    ints = np.zeros((3, tape.NFIELDS), np.int64)
    ints[2, tape.OP] = OPCODES["cumsum"]
    with pytest.raises(RuntimeError, match=r"the compiled reverse has no branch for the op 'cumsum' \(opcode \d+, "
                                           r"kernel 9 of the reduce family's kernel, entry 2\)"):
        raise engine.missing_kernel(ints, 2)


@pytest.mark.skipif(os.environ.get("TAPEGRAD_INTERPRET") == "always", reason="the compiled reverse is not run in this pass")
def test_a_reduce_kernel_without_a_branch_fails_the_backward_naming_the_op(tmp_path):
    """The whole path, in a copy of the package whose ``reduce_reverse`` lost cumsum's branch:
    the compiled backward raises naming cumsum."""
    dst = tmp_path / "tapegrad"
    shutil.copytree(os.path.join(ROOT, "tapegrad"), dst,
                    ignore=shutil.ignore_patterns("__pycache__", "_generated", "*.nbi", "*.nbc"))
    p = dst / "ops" / "reduce.py"
    text = p.read_text()
    at = text.index("def reduce_reverse(")
    branch = text.index("    elif k == CUMSUM:\n", at)
    p.write_text(text[:branch] + "    elif k == -1:        # (cumsum's branch removed)\n"
                 + text[branch + len("    elif k == CUMSUM:\n"):])
    code = ("import tapegrad as tg\n"
            "x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)\n"
            "try:\n"
            "    x.cumsum(0).sum().backward()\n"
            "except RuntimeError as e:\n"
            "    print(e)\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"),
               NUMBA_CACHE_DIR=str(tmp_path / "numba"), TAPEGRAD_INTERPRET="never", TAPEGRAD_BACKGROUND_COMPILE="0")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "the compiled reverse has no branch for the op 'cumsum'" in r.stdout, r.stdout + r.stderr[-3000:]


# -- the worked examples of docs/adding-an-op.md, through every path ---------------------
@pytest.mark.parametrize("f, shapes", [
    (lambda a, b: (tg.ldexp(a, b) * a).sum(), [(3, 4), (4,)]),
    (lambda x: (x.nansum(1) ** 2).sum() + tg.nansum(x.sin()), [(3, 4)]),
    (lambda x: (x.nanmean(0) ** 3).sum(), [(3, 4)]),
], ids=["ldexp", "nansum", "nanmean"])
def test_worked_examples_through_forward_mode_and_second_order(f, shapes):
    """An op added as docs/adding-an-op.md says (one row or section) works through
    hvp, jvp and hessian as through the reverse: against central differences of the gradient."""
    r = np.random.default_rng(5)
    xs = [r.uniform(0.5, 1.5, s) for s in shapes]
    vs = [r.standard_normal(s) for s in shapes]

    def gradient(at):
        ts = [tg.tensor(a, requires_grad=True) for a in at]
        f(*ts).backward()
        return [t.grad.numpy() for t in ts]
    eps = 1e-6
    fd = [(p - m) / (2 * eps) for p, m in zip(gradient([x + eps * v for x, v in zip(xs, vs)]),
                                              gradient([x - eps * v for x, v in zip(xs, vs)]))]
    _, hv = tg.autograd.functional.hvp(f, tuple(tg.tensor(x) for x in xs), tuple(tg.tensor(v) for v in vs))
    for h, d in zip(hv, fd):
        np.testing.assert_allclose(h.numpy(), d, rtol=1e-6, atol=1e-6)
    _, jv = tg.autograd.functional.jvp(f, tuple(tg.tensor(x) for x in xs), tuple(tg.tensor(v) for v in vs))
    fd_f = (f(*[tg.tensor(x + eps * v) for x, v in zip(xs, vs)]).item()
            - f(*[tg.tensor(x - eps * v) for x, v in zip(xs, vs)]).item()) / (2 * eps)
    assert jv.item() == pytest.approx(fd_f, rel=1e-6)
    # the Hessian in the first input, the others held: H v against the gradient's central differences
    H = tg.autograd.functional.hessian(lambda x0: f(x0, *[tg.tensor(x) for x in xs[1:]]), tg.tensor(xs[0]))
    n = xs[0].size
    held = [vs[0]] + [np.zeros_like(v) for v in vs[1:]]
    fd0 = (gradient([x + eps * v for x, v in zip(xs, held)])[0] - gradient([x - eps * v for x, v in zip(xs, held)])[0])
    np.testing.assert_allclose(H.numpy().reshape(n, n) @ vs[0].reshape(-1), fd0.reshape(-1) / (2 * eps),
                               rtol=1e-6, atol=1e-6)
