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
import test_linalg
import test_nn_functional_layers
import test_ops

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- the check of an elementwise row ------------------------------------------------
def test_every_row_of_the_table_passes_the_check():
    for op in elementwise.UNARY_OPS + elementwise.BINARY_OPS:
        assert codegen.check_row(op) <= codegen._MATH


def test_a_rule_calling_an_unknown_function_names_the_op_and_the_function():
    # radians is a math function (the kernels would compile) but no op of the table: create_graph could not run it
    row = Unary("sind", "SindBackward0", np.sin, "g * cos(radians(x))", "sin(radians(x))")
    with pytest.raises(OpDefinitionError, match=r"^elementwise op 'sind': its reverse rule 'g \* cos\(radians\(x\)\)' "
                                                 r"calls radians\(\), which the differentiable reverse does not define"):
        codegen.check_row(row)
    row = Binary("hyp", "HypBackward0", np.hypot, "g * a / y", "g * b / hypo(y)", "hypot(a, b)")
    with pytest.raises(OpDefinitionError, match=r"^elementwise op 'hyp': its reverse rule for b 'g \* b / hypo\(y\)' "
                                                 r"calls hypo\(\), which the compiled kernels do not define"):
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
    assert set(reduce._DIFFERENTIABLE) == set(reduce._REPLAY) == set(reduce.CODES) == set(range(12))
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
