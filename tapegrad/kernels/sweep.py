"""The compiled reverse sweep: one loop over the tape, from the roots down.

``mark`` finds the entries a backward must process (reachable from the roots
and, with ``inputs=``, leading to one of them) and the slots whose values it
reads.  ``run`` walks those entries in reverse order, dispatching once on the
opcode's family and letting the family kernel accumulate the adjoints of the
entry's inputs.  It returns early at an entry flagged in ``stops`` (a hook or a
retain_grad on that slot), so Python can run the hook on the finished adjoint and
resume; otherwise no Python runs during the sweep.
"""
import numpy as np

from .._jit import jit
from ..ops.linalg import linalg_reverse
from ..ops.reduce import reduce_reverse
from ..ops.registry import BINARY, CONST, LINALG, OPCODES, REDUCE, SAVES, SHAPE, UNARY
from ..ops.shape import VARIADIC, shape_reverse
from . import codegen
from .index import slot_view, strided_map, strided_scatter_add
from ..tape import F0, F1

_gen, SOURCE_HASH = codegen.load()
unary_reverse = _gen.unary_reverse
binary_reverse = _gen.binary_reverse

ADD = OPCODES["add"] & 63
SUB = OPCODES["sub"] & 63

SAVES_TABLE = np.zeros(6 << 6, np.int64)
for _code, _bits in SAVES.items():
    SAVES_TABLE[_code] = _bits


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
        if reach[s] and ints[s, 0] != CONST and sizes[s] >= big:
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
        if reach[s] and ints[s, 0] != CONST:
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
    slots this backward ``read`` no live entry needs any more."""
    n = ints.shape[0]
    keep = np.zeros(n, np.uint8)
    live = False
    for e in range(n):
        op = ints[e, 0]
        if op < 64:
            continue
        sv = saves[op]
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
    for s in read:
        if not keep[s]:
            cnt += 1
    drop = np.empty(cnt, np.int64)
    j = 0
    for s in read:
        if not keep[s]:
            drop[j] = s
            j += 1
    return live, drop


@jit
def address(a):
    """The data address of a float64 array (cheaper from here than from Python)."""
    return a.ctypes.data


@jit
def mark(ints, aux, saves, freed, roots, targets, use_targets, ext_leads):
    """Returns (process, reach, needval, error entry or -1)."""
    n = ints.shape[0]
    reach = np.zeros(n, np.uint8)
    process = np.zeros(n, np.uint8)
    needval = np.zeros(n, np.uint8)
    leads = np.ones(n, np.uint8)
    if use_targets:                 # leads[s]: s is, or depends on, a target
        leads[:] = 0
        for t in targets:
            leads[t] = 1
        for e in range(n):
            if leads[e]:
                continue
            op = ints[e, 0]
            if op < 64:
                if op == 2 and ext_leads:       # EXT: the target may be on the older tape
                    leads[e] = 1
                continue
            if ints[e, 3] == VARIADIC:
                at = ints[e, 4]
                for j in range(aux[at]):
                    s = aux[at + 1 + j]
                    if s >= 0 and leads[s]:
                        leads[e] = 1
            else:
                for col in range(1, 4):
                    s = ints[e, col]
                    if s >= 0 and leads[s]:
                        leads[e] = 1
    hi = -1
    for r in roots:
        reach[r] = 1
        if r > hi:
            hi = r
    for e in range(hi, -1, -1):
        if not reach[e]:
            continue
        op = ints[e, 0]
        if op < 64:
            continue
        any_in = False
        if ints[e, 3] == VARIADIC:
            at = ints[e, 4]
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
            return process, reach, needval, e
        process[e] = 1
        sv = saves[op]
        for col in range(1, 4):
            s = ints[e, col]
            if s >= 0 and sv & (1 << (col - 1)):
                needval[s] = 1
        if sv & 8:
            needval[e] = 1
    return process, reach, needval, -1


@jit(inline="always")
def _prep(s, touched, aloc, aptr, aarena, sizes):
    """Zero slot ``s``'s adjoint before its first contribution (large adjoints are
    allocated uninitialised, so a kernel that can assign instead never pays for it)."""
    if s >= 0 and aloc[s] != -1 and touched[s] == 0:
        slot_view(aloc, aptr, aarena, s, sizes[s])[:] = 0.0
        touched[s] = 1


@jit(inline="always")
def _fresh(s, touched, aloc):
    """True when ``s`` has an adjoint that has received nothing yet."""
    return s >= 0 and aloc[s] != -1 and touched[s] == 0


@jit
def run(ints, flts, sizes, process, reach, stops, touched, vloc, vptr, varena, aloc, aptr, aarena, aux,
        hi, resume):
    """Sweep entries ``hi`` .. 0; returns the entry it stopped at, or -1 when done."""
    empty = np.zeros(0, np.int64)
    for e in range(hi, -1, -1):
        if stops[e] and reach[e] and e != resume:
            return e
        if not process[e]:
            continue
        op = ints[e, 0]
        fam = op >> 6
        k = op & 63
        a = ints[e, 1]
        b = ints[e, 2]
        c = ints[e, 3]
        at = ints[e, 4]
        i1 = ints[e, 5]
        g = slot_view(aloc, aptr, aarena, e, sizes[e])
        if fam == UNARY:
            ovw = _fresh(a, touched, aloc)
            if a >= 0:
                touched[a] = 1
            unary_reverse(k, g, slot_view(vloc, vptr, varena, a, sizes[a]),
                          slot_view(vloc, vptr, varena, e, sizes[e]), flts[e, F0], flts[e, F1],
                          slot_view(aloc, aptr, aarena, a, sizes[a]), ovw)
        elif fam == BINARY:
            av = slot_view(vloc, vptr, varena, a, sizes[a])
            bv = slot_view(vloc, vptr, varena, b, sizes[b])
            cv = slot_view(vloc, vptr, varena, c, sizes[c] if c >= 0 else 0)
            yv = slot_view(vloc, vptr, varena, e, sizes[e])
            da = slot_view(aloc, aptr, aarena, a, sizes[a])
            db = slot_view(aloc, aptr, aarena, b, sizes[b])
            # assign instead of add when every adjoint written is fresh and full-size
            ovw = (at < 0 and a != b and (i1 & 3) == 0
                   and (da.size == 0 or _fresh(a, touched, aloc))
                   and (db.size == 0 or _fresh(b, touched, aloc)))
            if not ovw:
                _prep(a, touched, aloc, aptr, aarena, sizes)
                _prep(b, touched, aloc, aptr, aarena, sizes)
            if a >= 0:
                touched[a] = 1
            if b >= 0:
                touched[b] = 1
            if at >= 0 and (k == ADD or k == SUB):
                # broadcast add/sub: each adjoint is a strided sum of g, no index maps
                nd = aux[at]
                w = 2 + 2 * nd
                if da.size:
                    strided_scatter_add(da, g, aux, at, 1.0)
                if db.size:
                    strided_scatter_add(db, g, aux, at + w, 1.0 if k == ADD else -1.0)
            elif at >= 0:
                nd = aux[at]
                w = 2 + 2 * nd
                full = i1 >> 3
                ma = empty if full & 1 else strided_map(aux, at)
                mb = empty if full & 2 else strided_map(aux, at + w)
                mc = empty if full & 4 else strided_map(aux, at + 2 * w)
                binary_reverse(k, g, av, bv, cv, yv, da, db, 1, 0, 0, 0, ma, mb, mc, False, full)
            else:
                binary_reverse(k, g, av, bv, cv, yv, da, db, 0,
                               0 if i1 & 1 else 1, 0 if i1 & 2 else 1, 0 if i1 & 4 else 1,
                               empty, empty, empty, ovw, 0)
        elif fam == REDUCE:
            _prep(a, touched, aloc, aptr, aarena, sizes)
            reduce_reverse(k, g, slot_view(vloc, vptr, varena, a, sizes[a]),
                           slot_view(vloc, vptr, varena, e, sizes[e]),
                           slot_view(aloc, aptr, aarena, a, sizes[a]), aux, at, i1, flts[e, F0])
        elif fam == SHAPE:
            if c == VARIADIC:
                for j in range(aux[at]):
                    _prep(aux[at + 1 + j], touched, aloc, aptr, aarena, sizes)
            _prep(a, touched, aloc, aptr, aarena, sizes)
            _prep(b, touched, aloc, aptr, aarena, sizes)
            shape_reverse(k, g, slot_view(aloc, aptr, aarena, a, sizes[a] if a >= 0 else 0),
                          slot_view(aloc, aptr, aarena, b, sizes[b] if b >= 0 else 0),
                          aux, at, aloc, aptr, aarena, sizes)
        elif fam == LINALG:
            _prep(a, touched, aloc, aptr, aarena, sizes)
            _prep(b, touched, aloc, aptr, aarena, sizes)
            linalg_reverse(k, g, slot_view(vloc, vptr, varena, a, sizes[a]),
                           slot_view(vloc, vptr, varena, b, sizes[b]),
                           slot_view(aloc, aptr, aarena, a, sizes[a]),
                           slot_view(aloc, aptr, aarena, b, sizes[b]), aux, at)
    return -1


codegen.write_stamp(SOURCE_HASH)      # flushes the caches of kernels defined after load()
