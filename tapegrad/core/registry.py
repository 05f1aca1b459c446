"""The opcode enumeration.

An opcode is ``family << 6 | index``: the sweep dispatches once on the family and
each family's kernel dispatches on the index, so no compiled function holds more
than a few dozen branches (Numba's compile time grows superlinearly with them).

grad_fn names (``MulBackward0``...) live in a separate table, because several
names share one kernel (``x * 2`` and ``x / 2`` are both the scalar-multiply
kernel) and one name can cover several kernels.
"""

import os
from typing import Callable, NamedTuple

import numpy as np

META, UNARY, BINARY, REDUCE, SHAPE, LINALG, UNARY2, BINARY2, HOST = range(9)
FAMILY_NAMES = ("meta", "unary", "binary", "reduce", "shape", "linalg", "unary2", "binary2", "host")
# UNARY2 and BINARY2: the elementwise ops of the second table (``ops/elementwise.py``),
# whose kernels are compiled only once a backward meets one of them.
# HOST: ops whose reverse runs in Python between segments of the compiled sweep
# (ops/host.py): the sweep only stops at their entries, no kernel of theirs is compiled
META_END = (META + 1) << 6    # opcodes below it are meta entries (leaf, const, ext): they compute nothing


FAMILY_SHIFT, INDEX_MASK = 6, 63     # compiled code writes ``op >> FAMILY_SHIFT``, ``op & INDEX_MASK`` (folded)


def family(op):
    """The family of an opcode (``UNARY``...)."""
    return op >> FAMILY_SHIFT


def index(op):
    """An opcode's index inside its family, the branch of the family's kernel."""
    return op & INDEX_MASK

OPCODES = {}        # op name -> opcode
OP_NAMES = {}       # opcode -> op name
# opcode -> what its entries keep, bits 1 input a, 2 input b, 4 input c, 8 output, by
# ``rg`` (bit 0: input a needs a gradient, bit 1: input b); see ``define``
SAVES_BY_RG = {}
# the same as one array, [opcode, rg] (the compiled mark and free read it); filled by
# ``define``, so an op defined after the kernels were imported (a host op) is in it
SAVES_TABLE = np.zeros((len(FAMILY_NAMES) << FAMILY_SHIFT, 4), np.int64)
GRAD_FN_NAMES = []  # name id -> grad_fn name
_NAME_IDS = {}

SAVE_A, SAVE_B, SAVE_C, SAVE_OUT = 1, 2, 4, 8
# "Saves something" in PyTorch's sense decides whether a second backward through a
# freed entry is an error; some kernels need no value but PyTorch still saved one.
SAVE_MARKER = 16


def define(family, index, name, saves=0, reads=(0, 0)):
    """A new opcode.  What its entries keep for the reverse pass, PyTorch's way:
    ``saves`` whatever the inputs (the output, which PyTorch always saves, and what
    an op of one input reads), and ``reads[j]``, what the reverse rule of input j
    (a, b) reads, only when input j needs a gradient: ``x * w`` with only ``w``
    requiring grad keeps ``x``, not ``w``, so changing ``w`` in place (an optimizer
    step between two backward passes) is no error."""
    code = family << 6 | index
    assert code not in OP_NAMES and name not in OPCODES, name
    OPCODES[name] = code
    OP_NAMES[code] = name
    SAVES_BY_RG[code] = saves_by_rg(saves, reads)
    SAVES_TABLE[code] = SAVES_BY_RG[code]
    return code


def saves_by_rg(saves, reads):
    """The entry's mask for each ``rg``: bit 0 input a needs a gradient, bit 1 input b
    (index 0, no input needing one, is never recorded: the mask of both)."""
    both = saves | reads[0] | reads[1]
    return (both, saves | reads[0], saves | reads[1], both)


def name_id(grad_fn_name):
    i = _NAME_IDS.get(grad_fn_name)
    if i is None:
        i = _NAME_IDS[grad_fn_name] = len(GRAD_FN_NAMES)
        GRAD_FN_NAMES.append(grad_fn_name)
    return i


# Entries that only introduce a slot: a leaf that requires grad, a constant, and a
# tensor imported from an older tape (whose gradient is handed on to that tape).
LEAF = define(META, 0, "leaf")
CONST = define(META, 1, "const")
EXT = define(META, 2, "ext")


class NoForwardRule(NotImplementedError):
    """An entry of a tape has no forward-mode rule (``FamilyRules.tangent``...); the
    functional API falls back to its reverse-mode path."""

    @classmethod
    def named(cls, name):
        """PyTorch's message for the op ``name`` (its grad_fn's name)."""
        return cls("Trying to use forward AD with %s that does not support it because it has not been "
                   "implemented yet." % name)


class OpDefinitionError(Exception):
    """An op's record lacks a piece or names something unknown (raised at import,
    naming the op and the piece)."""


class EntryError(ValueError):
    """An entry's parameters would make compiled code index outside an array (a
    descriptor, an index or a size that disagrees with its inputs); ``entry``: its
    index on the tape, when known."""

    def __init__(self, message, entry=None):
        super().__init__(message)
        self.entry = entry


class FamilyRules(NamedTuple):
    """What the Python passes need of an op family, one lookup per entry
    (``FAMILY_RULES[family(op)]``); each family module registers its own at import.

    ``differentiable_reverse(ctx, s, k, row, f0, f1, g)``: the (input slot, adjoint
    tensor) pairs of entry ``s`` (kernel index ``k``) for the adjoint ``g``, with
    tapegrad's own ops (create_graph, and the interpreted backward);
    ``expands_adjoint``: ``g`` is made explicit first when one element stands for
    the whole slot (families that index the adjoint).
    ``replay_rule(k, row, aux, shape, name, f0, f1)``: the entry's forward as a
    function of the slot values (``tapegrad.replay``).
    ``scalar_replay``: the kernel indices the compiled replay of single numbers
    computes (``kernels.codegen``'s ``replay_scalar``).
    ``compiled_forward(k, ints, e, sizes, aux, live)``: whether the compiled replay
    of arrays (``kernels.forward``) computes entry ``e``.

    Forward mode and second order (``autograd.tangent``), on NumPy batches of K
    directions (tangents and adjoints ``(K, n)``, values flat, ``ctx`` a
    ``TangentContext``); None for a family that has none:
    ``tangent(ctx, s, k, row, f0, f1)``: the ``(K, n)`` tangent of entry ``s`` from
    its inputs' (``ctx.tan(i)``, None for zero), or None;
    ``batched_reverse(ctx, s, k, row, f0, f1, G)``: the (input slot, ``(K, n_i)``)
    adjoints for a batch ``G`` of the entry's adjoints (the reverse rule on K rows);
    ``curvature(ctx, s, k, row, f0, f1, g)``: for one adjoint ``g`` of the entry, the
    (input slot, ``(K, n_i)``) directional derivatives of its reverse rule as the
    values it reads move along their tangents (empty for a linear op).

    ``array_reverse(T, s, k, row, g)``, or None: at the compiled backward's stop at
    entry ``s`` of tape ``T``, the (input slot, flat float64 adjoint) pairs for its flat
    adjoint array ``g``, without tensors, each a new array the backward may keep as
    that slot's adjoint; or None where ``differentiable_reverse`` (grad mode off) must
    run instead.

    ``check_entries(ks, es, ints, aux)``: raise ``EntryError`` (naming the entry)
    unless every index the family's compiled code derives from entries ``es``
    (kernel indices ``ks``: arrays; their input slots, sizes and parameter words)
    lies inside the arrays it indexes; every family has one (``check_entries``
    below: a tape file on load, ``TAPEGRAD_CHECK_TAPES=1`` before every sweep)."""
    differentiable_reverse: Callable
    replay_rule: Callable
    expands_adjoint: bool
    scalar_replay: frozenset
    compiled_forward: Callable
    tangent: Callable = None
    batched_reverse: Callable = None
    curvature: Callable = None
    array_reverse: Callable = None
    check_entries: Callable = None


FAMILY_RULES = {}       # family -> FamilyRules


def register_family(fam, rules):
    if fam in FAMILY_RULES:
        raise OpDefinitionError("the %s family registered twice" % FAMILY_NAMES[fam])
    if rules.check_entries is None:
        raise OpDefinitionError("the %s family has no check_entries: its compiled code would index by "
                                "parameters nothing checked" % FAMILY_NAMES[fam])
    FAMILY_RULES[fam] = rules


# TAPEGRAD_CHECK_TAPES=1: every tape is checked entry by entry (``check_entries``)
# before a backward sweeps it, and every recording when it is made, so that a wrong
# descriptor or index made anywhere raises EntryError instead of reaching a kernel
# (a test mode: CI runs the bounds-checked suite so).
CHECK_TAPES = [os.environ.get("TAPEGRAD_CHECK_TAPES", "") == "1"]


def check_entries(ints, aux, start=0):
    """Check entries ``start ..`` of a tape (``ints``: its (n, NFIELDS) integer fields,
    ``aux`` its parameter words) with their families' ``check_entries``: an entry that
    would make compiled code index outside an array raises ``EntryError`` naming it.
    Meta entries (leaf, constant, import) index nothing."""
    ops = ints[start:, 0]
    es = np.arange(start, ints.shape[0])
    real = ops >= META_END
    fine = ~real | np.isin(ops, np.fromiter(OP_NAMES, np.int64))
    if not fine.all():
        i = int(np.argmin(fine))
        raise EntryError("entry %d has the unknown opcode %d" % (es[i], ops[i]), entry=int(es[i]))
    fams = ops >> FAMILY_SHIFT
    for fam in np.unique(fams[real]).tolist():
        sel = real & (fams == fam)
        try:
            FAMILY_RULES[fam].check_entries(ops[sel] & INDEX_MASK, es[sel], ints, aux)
        except EntryError as err:
            e = err.entry
            raise EntryError("entry %d (%s): %s" % (e, OP_NAMES[int(ints[e, 0])], err), entry=e) from None


def each_entry(check):
    """A family's ``check_entries`` made of ``check(k, e, ints, aux)``, which checks one entry."""
    def check_each(ks, es, ints, aux):
        for k, e in zip(ks.tolist(), es.tolist()):
            try:
                check(k, e, ints, aux)
            except EntryError as err:
                err.entry = e
                raise
    return check_each
