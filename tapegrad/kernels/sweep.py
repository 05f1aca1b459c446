"""The compiled reverse sweep: one loop over the tape, from the roots down.

``mark`` finds the entries a backward must process (reachable from the roots
and, with ``inputs=``, leading to one of them) and the slots whose values it
reads.  ``run`` walks those entries in reverse order, dispatching once on the
opcode's family and letting the family kernel accumulate the adjoints of the
entry's inputs.  It returns early at an entry flagged in ``stops`` (a hook or a
retain_grad on that slot), so Python can run the hook on the finished adjoint and
resume; otherwise no Python runs during the sweep.

``run`` exists in variants, one per combination of the families a backward uses
(``mark`` returns them as a mask, ``run_for`` picks the variant): a variant never
compiles the kernels of the families it lacks, so the first backward of a process
with an empty Numba cache compiles only what its tape needs.
"""
import os

import numpy as np

from .. import _jit
from .._jit import address_as_pointer, jit, numba
from ..ops.linalg import linalg_reverse
from ..ops.reduce import reduce_reverse
from ..core.registry import (BINARY, BINARY2, CONST, EXT, FAMILY_SHIFT, INDEX_MASK, LINALG, META_END, OPCODES,
                             REDUCE, SHAPE, UNARY, UNARY2, index)
from ..core.registry import SAVES_TABLE as _SAVES_TABLE
from ..ops.shape import VARIADIC, shape_reverse
from . import codegen
from ..core.descriptors import slot_view, strided_scatter_add
from ..core.tape import A, AUX, B, C, F0, F1, OP, PARAM

_gen, SOURCE_HASH = codegen.load()
unary_reverse = _gen.unary_reverse
binary_reverse = _gen.binary_reverse
unary2_reverse = _gen.unary2_reverse        # the second table's (UNARY2, BINARY2)
binary2_reverse = _gen.binary2_reverse
# ... which the sweep calls by the addresses of their C entries (``ENTRIES``), so that
# no variant of it compiles them again (see ``_jit.c_entry``)
call_unary = _jit.c_caller(codegen.UNARY_ENTRY_ARGS)
call_binary = _jit.c_caller(codegen.BINARY_ENTRY_ARGS)
# the C entries of unary_reverse, binary_reverse, unary2_reverse, binary2_reverse (0: not made yet)
ENTRIES = np.zeros(4, np.int64)
replay_scalar = _gen.replay_scalar     # tapegrad.replay: a tape of single numbers, forward
sweep_scalar = _gen.sweep_scalar       # ... and reverse

def by_call():
    """Whether the sweep calls the elementwise kernels directly (NUMBA_BOUNDSCHECK=1)
    rather than by address."""
    return bool(int(os.environ.get("NUMBA_BOUNDSCHECK", "0") or 0))


ADD = index(OPCODES["add"])
SUB = index(OPCODES["sub"])

# What an entry keeps (bits: 1 input a, 2 b, 4 c, 8 output), by opcode and by which
# of its inputs need a gradient: bit 0 input a, bit 1 input b (a constant's slot is
# the one kind of input that does not).  ``mark`` and ``free_saved`` compute those
# bits inline (a helper kernel would load Numba when they run as Python).
SAVES_TABLE = _SAVES_TABLE      # (core/registry.py's: ``define`` fills it, host ops defined later too)


@jit
def layout(ints, sizes, needval, reach, big):
    """Where each slot's value and adjoint live for one backward.

    Values: one-element slots at their own index (the tape's VAL column starts the
    value arena), other small slots packed after it (``vsmall``, in order), large
    ones by address (``vbig``, filled in by Python).  Adjoints: small ones packed
    in a zeroed arena, large ones allocated by Python (``abig``), left
    uninitialised (``touched`` 0) until the sweep's first write."""
    n = ints.shape[0]
    vloc = np.full(n, -1, np.int64)
    aloc = np.full(n, -1, np.int64)
    touched = np.ones(n, np.uint8)
    nv_small = 0
    nv_big = 0
    na_big = 0
    for s in range(n):
        if needval[s]:
            sz = sizes[s]
            if sz == 1:
                vloc[s] = s
            elif sz < big:
                nv_small += 1
            else:
                nv_big += 1
        if reach[s] and ints[s, OP] != CONST and sizes[s] >= big:
            na_big += 1
    vsmall = np.empty(nv_small, np.int64)
    vbig = np.empty(nv_big, np.int64)
    abig = np.empty(na_big, np.int64)
    off = n
    iv = 0
    ib = 0
    aoff = 0
    ia = 0
    for s in range(n):
        sz = sizes[s]
        if needval[s] and sz != 1:
            if sz < big:
                vloc[s] = off
                off += sz
                vsmall[iv] = s
                iv += 1
            else:
                vloc[s] = -2
                vbig[ib] = s
                ib += 1
        if reach[s] and ints[s, OP] != CONST:
            if sz < big:
                aloc[s] = aoff
                aoff += sz
            else:
                aloc[s] = -2
                abig[ia] = s
                ia += 1
                touched[s] = 0
    return vloc, vsmall, vbig, aloc, aoff, abig, touched


@jit
def free_saved(ints, saves, process, freed, read):
    """After a non-retained backward: mark the processed entries that saved values
    as freed; return whether any entry still holds saved values, and which of the
    slots this backward read (mask ``read``) no live entry needs any more."""
    n = ints.shape[0]
    keep = np.zeros(n, np.uint8)
    live = False
    for e in range(n):
        op = ints[e, OP]
        if op < META_END:
            continue
        a = ints[e, A]
        b = ints[e, B]
        sv = saves[op, (1 if a >= 0 and ints[a, OP] != CONST else 0) | (2 if b >= 0 and ints[b, OP] != CONST else 0)]
        if sv == 0:
            continue
        if process[e]:
            freed[e] = 1
        if freed[e]:
            continue
        live = True
        for col in range(1, 4):
            s = ints[e, col]
            if s >= 0 and sv & (1 << (col - 1)):
                keep[s] = 1
        if sv & 8:
            keep[e] = 1
    cnt = 0
    for s in range(n):
        if read[s] and not keep[s]:
            cnt += 1
    drop = np.empty(cnt, np.int64)
    j = 0
    for s in range(n):
        if read[s] and not keep[s]:
            drop[j] = s
            j += 1
    return live, drop


@jit
def address(a):
    """The data address of a float64 array (cheaper from here than from Python)."""
    return a.ctypes.data


@jit
def mark(ints, aux, saves, freed, roots, targets, use_targets, ext_leads, lo):
    """``lo``: no entry below it leads to a target (with targets; else 0).  Returns (process, reach, needval, error entry or -1, mask of the processed
    entries' families: bit ``op >> FAMILY_SHIFT``, see ``run_for``)."""
    n = ints.shape[0]
    reach = np.zeros(n, np.uint8)
    process = np.zeros(n, np.uint8)
    needval = np.zeros(n, np.uint8)
    leads = np.ones(n, np.uint8)
    # (both loops stop at ``lo``: a tape long with history, as a loop of create_graph grads
    # makes by resuming one tape, costs what the graph between the targets and the roots does)
    if use_targets:                 # leads[s]: s is, or depends on, a target
        leads[:] = 0
        for t in targets:
            leads[t] = 1
        for e in range(lo, n):
            if leads[e]:
                continue
            op = ints[e, OP]
            if op < META_END:
                if op == EXT and ext_leads:       # EXT: the target may be on the older tape
                    leads[e] = 1
                continue
            if ints[e, C] == VARIADIC:
                at = ints[e, AUX]
                for j in range(aux[at]):
                    s = aux[at + 1 + j]
                    if s >= 0 and leads[s]:
                        leads[e] = 1
            else:
                for col in range(1, 4):
                    s = ints[e, col]
                    if s >= 0 and leads[s]:
                        leads[e] = 1
    fams = 0
    hi = -1
    for r in roots:
        reach[r] = 1
        if r > hi:
            hi = r
    for e in range(hi, lo - 1, -1):
        if not reach[e]:
            continue
        op = ints[e, OP]
        if op < META_END:
            continue
        any_in = False
        if ints[e, C] == VARIADIC:
            at = ints[e, AUX]
            for j in range(aux[at]):
                s = aux[at + 1 + j]
                if s >= 0 and leads[s]:
                    reach[s] = 1
                    any_in = True
        else:
            for col in range(1, 4):
                s = ints[e, col]
                if s >= 0 and leads[s]:
                    reach[s] = 1
                    any_in = True
        if not any_in:
            continue
        if freed[e]:
            return process, reach, needval, e, fams
        process[e] = 1
        fams |= 1 << (op >> FAMILY_SHIFT)
        a = ints[e, A]
        b = ints[e, B]
        sv = saves[op, (1 if a >= 0 and ints[a, OP] != CONST else 0) | (2 if b >= 0 and ints[b, OP] != CONST else 0)]
        for col in range(1, 4):
            s = ints[e, col]
            if s >= 0 and sv & (1 << (col - 1)):
                needval[s] = 1
        if sv & 8:
            needval[e] = 1
    return process, reach, needval, -1, fams


@jit
def _zero_at(p, n):
    numba.carray(address_as_pointer(p), n, np.float64)[:] = 0.0


@jit
def _addresses(loc, ptr, base, n):
    """Address of every slot (0: none), plus a sentinel 0 at index -1 so that an
    absent input (slot -1) needs no branch."""
    out = np.zeros(n + 1, np.int64)
    for s in range(n):
        l = loc[s]
        if l >= 0:
            out[s] = base + 8 * l
        elif l == -2:
            out[s] = ptr[s]
    return out


FAMILIES = (UNARY, BINARY, REDUCE, SHAPE, LINALG, UNARY2, BINARY2)
ALL = sum(1 << f for f in FAMILIES)     # a mask of families: bit ``f`` for family ``f``


def _make_run(fams):
    """The reverse sweep for tapes whose processed entries all belong to the families
    in the mask ``fams`` (``mark`` computes it).

    The flags below are constants of the compiled function (a closure's cells are),
    so Numba prunes the branches of absent families before typing: their kernels are
    never compiled.  Numba's disk cache keys a closure on its cells' contents, so
    each variant is cached on its own (all in one index file)."""
    has_unary = bool(fams >> UNARY & 1)
    has_binary = bool(fams >> BINARY & 1)
    has_reduce = bool(fams >> REDUCE & 1)
    has_shape = bool(fams >> SHAPE & 1)
    has_linalg = bool(fams >> LINALG & 1)
    has_unary2 = bool(fams >> UNARY2 & 1)
    has_binary2 = bool(fams >> BINARY2 & 1)
    has_other = has_reduce or has_shape or has_linalg
    # With NUMBA_BOUNDSCHECK=1 the elementwise kernels are called directly: an index
    # error raised in a C entry could not reach Python (it is printed and ignored)
    direct = by_call()

    def run(ints, flts, sizes, process, reach, stops, touched, vloc, vptr, varena, aloc, aptr, aarena, aux,
            hi, resume, entries):
        """Sweep entries ``hi`` .. 0; returns the entry it stopped at, -1 when done, or
        -2 - e when entry e's family kernel has no branch for its op.
        ``entries``: ``ENTRIES``, the elementwise kernels' addresses.

        The loop body is written out rather than split into small inlined helpers:
        every array handed to a helper costs reference-count updates per entry, which
        dominated the time of small entries."""
        n = ints.shape[0]
        vbase = np.int64(varena.ctypes.data)
        abase = np.int64(aarena.ctypes.data)
        auxp = np.int64(aux.ctypes.data)
        vaddr = _addresses(vloc, vptr, vbase, n)
        aaddr = _addresses(aloc, aptr, abase, n)
        sz = np.zeros(n + 1, np.int64)
        fresh = np.zeros(n + 1, np.uint8)       # 1: adjoint allocated but never written
        for s in range(n):      # (not ``sz[:n] = sizes``: its shape-mismatch error alone took 5 s to compile)
            sz[s] = sizes[s]
            fresh[s] = aaddr[s] != 0 and touched[s] == 0
        for e in range(hi, -1, -1):
            if stops[e] and reach[e] and e != resume:
                for s in range(n):
                    touched[s] = not fresh[s]
                return e
            if not process[e]:
                continue
            op = ints[e, OP]
            fam = op >> FAMILY_SHIFT
            k = op & INDEX_MASK
            a = ints[e, A]
            b = ints[e, B]
            c = ints[e, C]
            at = ints[e, AUX]
            i1 = ints[e, PARAM]
            if (has_unary and fam == UNARY) or (has_unary2 and fam == UNARY2):
                ovw = fresh[a] == 1
                fresh[a] = 0
                if direct and fam == UNARY:
                    unary_reverse(k, sz[e], aaddr[e], vaddr[a], vaddr[e], flts[e, F0], flts[e, F1], aaddr[a], ovw)
                elif direct:
                    unary2_reverse(k, sz[e], aaddr[e], vaddr[a], vaddr[e], flts[e, F0], flts[e, F1], aaddr[a], ovw)
                else:
                    call_unary(entries[0 if fam == UNARY else 2],
                               (k, sz[e], aaddr[e], vaddr[a], vaddr[e], flts[e, F0], flts[e, F1], aaddr[a], ovw))
                continue
            if (has_binary and fam == BINARY) or (has_binary2 and fam == BINARY2):
                if at >= 0 and fam == BINARY and (k == ADD or k == SUB):
                    # broadcast add/sub: each adjoint is a strided sum of g, no index maps
                    for s in (a, b):
                        if fresh[s]:
                            _zero_at(aaddr[s], sz[s])
                            fresh[s] = 0
                    g = slot_view(aloc, aptr, abase, e, sz[e])
                    if aaddr[a] != 0:
                        strided_scatter_add(slot_view(aloc, aptr, abase, a, sz[a]), g, aux, at, 1.0)
                    if aaddr[b] != 0:
                        strided_scatter_add(slot_view(aloc, aptr, abase, b, sz[b]), g, aux,
                                            at + 2 + 2 * aux[at], 1.0 if k == ADD else -1.0)
                    continue
                # assign instead of add when every adjoint written is fresh and full-size
                ovw = (at < 0 and a != b and (i1 & 3) == 0 and (aaddr[a] == 0 or fresh[a] == 1)
                       and (aaddr[b] == 0 or fresh[b] == 1))
                if not ovw:
                    for s in (a, b):
                        if fresh[s]:
                            _zero_at(aaddr[s], sz[s])
                fresh[a] = 0
                fresh[b] = 0
                if direct and fam == BINARY:
                    binary_reverse(k, sz[e], aaddr[e], vaddr[a], sz[a], vaddr[b], sz[b], vaddr[c], sz[c], vaddr[e],
                                   aaddr[a], aaddr[b], 0 if i1 & 1 else 1, 0 if i1 & 2 else 1, 0 if i1 & 4 else 1,
                                   aux, at, i1 >> 3, ovw)
                elif direct:
                    binary2_reverse(k, sz[e], aaddr[e], vaddr[a], sz[a], vaddr[b], sz[b], vaddr[c], sz[c], vaddr[e],
                                    aaddr[a], aaddr[b], 0 if i1 & 1 else 1, 0 if i1 & 2 else 1, 0 if i1 & 4 else 1,
                                    aux, at, i1 >> 3, ovw)
                else:
                    call_binary(entries[1 if fam == BINARY else 3], (k, sz[e], aaddr[e], vaddr[a], sz[a], vaddr[b], sz[b], vaddr[c], sz[c],
                                             vaddr[e], aaddr[a], aaddr[b], 0 if i1 & 1 else 1, 0 if i1 & 2 else 1,
                                             0 if i1 & 4 else 1, auxp, aux.size, at, i1 >> 3, ovw))
                continue
            if not has_other:
                continue
            # the other families: zero every adjoint they add into, then call the kernel
            if c == VARIADIC:
                for j in range(aux[at]):
                    s = aux[at + 1 + j]
                    if s >= 0 and fresh[s]:
                        _zero_at(aaddr[s], sz[s])
                        fresh[s] = 0
            for s in (a, b):
                if fresh[s]:
                    _zero_at(aaddr[s], sz[s])
                    fresh[s] = 0
            g = slot_view(aloc, aptr, abase, e, sz[e])
            done = True
            if has_reduce and fam == REDUCE:
                done = reduce_reverse(k, g, slot_view(vloc, vptr, vbase, a, sz[a]),
                                      slot_view(vloc, vptr, vbase, e, sz[e]), slot_view(aloc, aptr, abase, a, sz[a]),
                                      aux, at, i1, flts[e, F0])
            elif has_shape and fam == SHAPE:
                done = shape_reverse(k, g, slot_view(aloc, aptr, abase, a, sz[a]),
                                     slot_view(aloc, aptr, abase, b, sz[b]), aux, at, aloc, aptr, aarena, sizes)
            elif has_linalg and fam == LINALG:
                done = linalg_reverse(k, g, slot_view(vloc, vptr, vbase, a, sz[a]),
                                      slot_view(vloc, vptr, vbase, b, sz[b]), slot_view(aloc, aptr, abase, a, sz[a]),
                                      slot_view(aloc, aptr, abase, b, sz[b]), aux, at)
            if not done:        # a family kernel without this op's branch: the engine names it
                for s in range(n):
                    touched[s] = not fresh[s]
                return -2 - e
        for s in range(n):
            touched[s] = not fresh[s]
        return -1

    return jit(run)


# Variants are per group of families, 8 at most: each variant costs seconds to
# compile even when its kernels are cached (Numba optimises and emits again the
# code of the kernels it calls), and ``warmup`` makes them all.  Unary and binary
# ops are rarely apart; shape and linalg kernels are the cheapest to compile;
# reductions are apart, being in nearly every tape (a tape of elementwise ops and
# a sum compiles neither shape nor linalg kernels).
# The second elementwise table rides with the first: a variant calls its kernels by
# address (``make_entries`` makes them once a backward meets one of its ops).
GROUPS = ((1 << UNARY) | (1 << BINARY) | (1 << UNARY2) | (1 << BINARY2), 1 << REDUCE, (1 << SHAPE) | (1 << LINALG))
_VARIANT_OF = [0] * (ALL + 1)           # mask of families -> its variant's mask
for _m in range(ALL + 1):
    for _g in GROUPS:
        if _m & _g:
            _VARIANT_OF[_m] |= _g
VARIANTS = tuple(sorted(set(_VARIANT_OF)))


def variant(fams):
    """The variant's mask for the families in mask ``fams``: a superset of it."""
    return _VARIANT_OF[fams]


# Every family: made at import, so that the stale-cache flush at ``load`` (see
# ``codegen.write_stamp``) empties the index file all variants share.
run = _make_run(ALL)
_RUNS = {}          # mask of families (as ``mark`` gives it) -> the variant's dispatcher
_VARIANTS = {}      # variant mask -> dispatcher


def run_for(fams):
    """The sweep compiled for (at least) the families in mask ``fams``, made on
    first use; compiled, or loaded from Numba's cache, at its first call."""
    r = _RUNS.get(fams)
    if r is None:
        r = _new_run(fams)
    return r


def _new_run(fams):
    if not _jit.READY[0]:
        _jit.load()         # (a variant made from now on is a dispatcher, not a stand-in)
    return variant_dispatcher(fams)


ELEMENTWISE = (1 << UNARY) | (1 << BINARY)
SECOND_TABLE = (1 << UNARY2) | (1 << BINARY2)


def make_entries(fams=ELEMENTWISE):
    """(Once Numba is loaded.)  The C entries of the elementwise kernels, compiled
    or loaded from the cache, their addresses in ``ENTRIES``; the second table's
    only when ``fams`` has one of its families."""
    if by_call():
        return
    if ENTRIES[1] == 0:
        ENTRIES[0] = _jit.c_entry(_gen.unary_reverse_entry, codegen.UNARY_ENTRY_ARGS).address
        ENTRIES[1] = _jit.c_entry(_gen.binary_reverse_entry, codegen.BINARY_ENTRY_ARGS).address
    if fams & SECOND_TABLE and ENTRIES[3] == 0:
        ENTRIES[2] = _jit.c_entry(_gen.unary2_reverse_entry, codegen.UNARY_ENTRY_ARGS).address
        ENTRIES[3] = _jit.c_entry(_gen.binary2_reverse_entry, codegen.BINARY_ENTRY_ARGS).address


def variant_dispatcher(fams):
    """(Once Numba is loaded.)  The variant's dispatcher for mask ``fams``, made if new."""
    v = variant(fams)
    if v & ELEMENTWISE:
        make_entries(fams)      # (before the variant is handed out: it calls them by address)
    with _jit._LOCK:
        r = _VARIANTS.get(v)
        if r is None:
            r = _VARIANTS[v] = run if v == ALL else _make_run(v)
        _RUNS[fams] = r
    return r


def compile_variants():
    """Compile every variant for every argument types any variant was compiled for
    in this process (``python -m tapegrad warmup``); returns the variants' masks."""
    sigs = {sig for r in list(_VARIANTS.values()) for sig in r.signatures}
    for v in VARIANTS:
        r = _new_run(v)
        for sig in sigs:
            r.compile(sig)
    return VARIANTS


codegen.write_stamp(SOURCE_HASH)      # flushes the caches of kernels defined after load()
