"""``grad(f, inputs, create_graph=True)`` of a scalar ``f``: each gradient as one entry.

The general ``create_graph`` path (``differentiable``) records the gradient's
computation op by op from Python, so that a second backward can walk it.  For the
most common second-order use, one scalar differentiated once more (``H v`` by
double backward, a gradient penalty), the same second backward can instead come
from the tape itself: the gradient ``g_i`` of input ``x_i`` is one run of the tape's
compiled program (``tangent_program``, kind "grad": the reverse alone), or the
compiled sweep's, recorded as one host entry ``grad_of`` whose inputs are the leaves
``g_i`` depends on, and whose reverse for an adjoint ``u`` is one run of its forward-
over-reverse program along ``u`` at ``x_i`` (kind "hv": the tangents of the adjoints
alone): ``d/dl (u . g_i)`` for every such leaf ``l``.

What the user sees stays that of the op-by-op path, which serves the first calls of
each tape structure and is observed (``_Observation``): each gradient's ``grad_fn``
name, whether it requires grad, and the leaves its graph reaches.  A later call of
the same structure takes the entry once the structure's program is compiled.  With
grad mode on in its reverse (a third derivative, or ``create_graph`` through it) the
entry differentiates op by op again.  Anything else (several outputs, given
``grad_outputs``, hooks, anomaly mode, recording for replay, float32, interpreted
backward passes) takes the op-by-op path.
"""
import contextlib

import numpy as np

from .. import _jit
from ..core import tape as _tp
from ..core.registry import GRAD_FN_NAMES
from ..core.tensor import Tensor
from ..kernels import sweep as K
from ..ops import host as _h
from . import api, engine, walk
from . import tangent_program as _program
from .grad_mode import enable_grad, is_grad_enabled, set_grad_enabled
from .tangent import leaf_slot

OBSERVE = 2             # op-by-op calls of a tape structure observed before the entry serves it
MAX_OBSERVED = 1024     # structures remembered (then forgotten all at once, as a cache)
ENABLED = [True]
SERVED = [0]            # grad calls the entry served (tests, benchmarks)

_F64 = np.dtype(np.float64)
_NOTHING = contextlib.nullcontext()


class _Observation:
    """What the op-by-op path gave for one tape structure: per input, None (no
    gradient), False (a gradient that does not require grad) or (its grad_fn name,
    the leaf slots its graph reaches); ``ok`` False where the entry cannot stand in."""
    __slots__ = ("calls", "per_input", "ok", "programs", "gradients")

    def __init__(self):
        self.calls, self.per_input, self.ok = 0, None, True
        self.programs = None        # once every program is compiled: what ``fused`` found
        self.gradients = None       # then where ``_gradients`` takes them, or False


_OBSERVED = {}          # structure key -> _Observation


class Attempt:
    """One eligible ``grad`` call: ``fused()`` gives its gradients by the entry, or None
    (the caller takes the op-by-op path and then calls ``observe``)."""
    __slots__ = ("T", "out", "inputs", "slots", "obs")

    def fused(self):
        obs = self.obs
        if not obs.ok or obs.per_input is None:
            return None
        T, out = self.T, self.out
        progs = obs.programs
        if progs is None:
            progs = self._programs()
            if progs is None:
                return None
        arrays = self._gradients(progs)
        if arrays is None:
            arrays = engine.run_backward([(out, np.ones(1))], True, self.inputs, False)
        res = {}
        with set_grad_enabled(True) if not is_grad_enabled() else _NOTHING:
            for i, got, seeds, targets, p in progs:
                x = self.inputs[i]
                g = arrays.get(id(x))
                if got is None or g is None:
                    continue
                g = np.asarray(g, _F64).reshape(x.shape)
                if got is False:
                    res[id(x)] = Tensor._wrap(g)
                    continue
                name, deps = got
                y = _h.record(_GRAD_OF, [T.leaves[s] for s in targets], g, grad_fn=name)
                y._tape.keep_host_state(y._slot, _Entry(T, out, self.slots[i], seeds, targets, p[1]))
                res[id(x)] = y
        SERVED[0] += 1
        return res

    def _gradients(self, progs):
        """{id(input): flat gradient} from one run of a program whose wanted slots hold
        every input with a gradient (a "grad" program: the gradients alone): the
        compiled backward's bookkeeping costs more than that run.  None where no program
        holds them all, or the tape freed something or changed in place (the backward
        then says what)."""
        T, where = self.T, self.obs.gradients
        if where is None:
            where = self.obs.gradients = _where_gradients(progs, self.slots)
        if not where or not T.intact():
            return None
        program, seeds, picks = where
        res = _run(T, program, seeds, None, None)
        if res is None:
            return None
        _tp.rotate()    # (as after a backward: the entries go to a new tape, which refers to this one)
        return {id(self.inputs[i]): res[j] for i, j in picks}

    def _programs(self):
        """Per input (index, observed, seeds, targets, (its gradients' program, their
        derivatives')), once the op-by-op path was observed ``OBSERVE`` times and every
        program is compiled (then kept in the observation); else None.  Each call counts
        a walk of the programs: compiled at their ``COMPILE_AFTER``-th."""
        obs, T, out = self.obs, self.T, self.out
        progs, ready = [], True
        for i, got in enumerate(obs.per_input):
            if got:
                seeds, targets = _seeds_targets(self.slots[i], got[1])
                p = tuple(_program.program(T, kind, seeds, targets, (out._slot,)) for kind in ("grad", "hv"))
                if None in p:
                    obs.ok = False
                    return None
                ready = ready and p[0][2] is not None and p[1][2] is not None
                progs.append((i, got, seeds, targets, p))
            else:
                progs.append((i, got, None, None, None))
        if obs.calls < OBSERVE or not ready:
            return None         # (op by op, observed once more)
        obs.programs = progs
        return progs

    def observe(self, res):
        """Note what the op-by-op path gave (``res``: {id(input): Tensor})."""
        obs = self.obs
        obs.calls += 1
        if not obs.ok:
            return
        per = []
        for i, x in enumerate(self.inputs):
            g = res.get(id(x))
            if g is None:
                per.append(None)
            elif not g.requires_grad:
                per.append(False)
            elif g._tape is not self.T:
                obs.ok = False          # (recorded elsewhere: not a case the entry stands in for)
                return
            else:
                per.append((GRAD_FN_NAMES[self.T.field(g._slot, _tp.NAME)], _leaves_reached(self.T, g._slot)))
        if obs.per_input is not None and per != obs.per_input:
            obs.ok = False              # (the structure did not decide it)
            return
        obs.per_input = per


def attempt(outputs, inputs, given, retain_graph):
    """An ``Attempt`` for ``grad(outputs, inputs, given, retain_graph, create_graph=True)``,
    or None where only the op-by-op path serves.  (Called before ``grad`` checks its
    arguments: an attempt is made only for one float64 scalar output on a tape, given
    no gradient, for which those checks cannot fail.)"""
    if (not ENABLED[0] or not _jit.READY[0] or engine.INTERPRET[0] == "always" or _program.MODE[0] == "off"
            or _tp.anomaly[0] or engine.PROFILERS or retain_graph is False
            or len(outputs) != 1 or len(given) != 1 or given[0] is not None or not isinstance(outputs[0], Tensor)):
        return None
    out = outputs[0]
    T = out._tape
    if (T is None or out.dtype != _F64 or out._data.size != 1 or out._slot >= _program.MAX_ENTRIES
            or T.plan is not None or T.hooks or T.retained
            or T.ext or getattr(T, "host_state", None) or _tp.state().rec is not None or out._slot_version != out._ver[0]):
        return None
    slots = []
    for x in inputs:
        if x.dtype != _F64 or (x._extra is not None and (x._extra.hooks or x._extra.base is not None)):
            return None
        s = leaf_slot(T, x)
        if s is None or s < 0 or s in slots:
            return None
        slots.append(s)
    ints, flts = T.arrays()
    key = ("grad_of",) + _program._key(T, 0, out._slot, slots, (), (out._slot,), ints, flts)
    obs = _OBSERVED.get(key)
    if obs is None:
        if len(_OBSERVED) >= MAX_OBSERVED:
            _OBSERVED.clear()
        obs = _OBSERVED[key] = _Observation()
    a = Attempt()
    a.T, a.out, a.inputs, a.slots, a.obs = T, out, inputs, slots, obs
    return a


def _where_gradients(progs, slots):
    """(a "grad" program whose wanted slots hold every input with a gradient, its seeded
    slots, [(input index, its result's index)]), or False where none does."""
    want = {slots[i] for i, got, _, _, _ in progs if got is not None}
    for _, got, seeds, targets, p in progs:
        if got and want <= set(targets):
            return p[0], seeds, [(i, targets.index(s)) for i, s in enumerate(slots) if s in want]
    return False


def _seeds_targets(x_slot, deps):
    """The program's seeded slots (the leaves reached, and the input itself) and wanted ones."""
    return sorted(set(deps) | {x_slot}), list(deps)


def _leaves_reached(T, s):
    """The leaf slots of ``T`` that the graph from slot ``s`` reaches (the sweep's own mark;
    nothing counts as freed)."""
    ints, _ = T.arrays()
    reach = K.mark(ints, T.aux_array(), K.SAVES_TABLE, walk.zeros_u8(T.n), np.array([s], np.int64),
                   np.zeros(0, np.int64), False, False, 0)[1]
    return tuple(l for l in sorted(T.leaves) if reach[l])


class _Entry:
    """What a ``grad_of`` entry keeps: the tape ``T`` and output ``out`` it is the
    gradient of, its input's slot there, and the program's seeded and wanted slots."""
    __slots__ = ("T", "out", "x_slot", "seeds", "targets", "program")

    def __init__(self, T, out, x_slot, seeds, targets, program):
        self.T, self.out, self.x_slot = T, out, x_slot
        self.seeds, self.targets, self.program = seeds, targets, program


def _forward(xs, ints, floats):
    raise RuntimeError("tapegrad: a gradient recorded by grad(create_graph=True) cannot be replayed")


def _reverse(xs, y, g, ints, floats, needs, entry, tie):
    """The adjoints of the leaves ``g_i`` depends on, for its adjoint ``g``."""
    U, s = entry
    e = U.host_state[s]
    T = e.T
    leaves = [T.leaves[t] for t in e.targets]
    if is_grad_enabled():       # a derivative of the result wanted too: op by op
        return _op_by_op(e, leaves, g, True)
    # the errors of a backward through the original graph: freed, or changed in place
    if not T.intact():
        walk.mark(T, T.arrays()[0], {e.out._slot: None}, {id(x): x for x in leaves}, False)
    res = _run(T, e.program, e.seeds, e.x_slot, np.ascontiguousarray(g._data, _F64))
    if res is None:             # (a value it reads is not float64)
        return _op_by_op(e, leaves, g, False)
    return [Tensor._wrap(h.reshape(x.shape)) for h, x in zip(res, leaves)]


def _array_reverse(g, entry):
    """``_reverse`` at the compiled backward's stop, on its flat adjoint array ``g``; None
    (``_reverse`` then runs and says why) where the original graph freed something or
    changed in place, or the program cannot run."""
    U, s = entry
    e = U.host_state[s]
    if not e.T.intact():
        return None
    return _run(e.T, e.program, e.seeds, e.x_slot, g)


def _run(T, program, seeds, x_slot, u):
    """The program's flat results (per wanted slot: its gradient, "grad", or the
    gradient's derivative, "hv") with the tangent ``u`` at ``x_slot`` (None: zero) and
    zero at its other seeded slots; None where it cannot run (``_program.execute``)."""
    return _program.execute(program, T, {t: (u.reshape(1, -1) if t == x_slot and u is not None
                                             else _zeros(int(T.field(t, _tp.SIZE)))) for t in seeds})


_ZEROS = {}


def _zeros(n):
    """A (1, n) tangent of zeros, shared: a program only reads its seeds' tangents (not
    marked read-only, which Numba would compile the program for once more)."""
    z = _ZEROS.get(n)
    if z is None:
        if len(_ZEROS) > 64:
            _ZEROS.clear()
        z = _ZEROS[n] = np.zeros((1, n))
    return z


def _op_by_op(e, leaves, g, create_graph):
    """The adjoints as the op-by-op path computes them: the gradient recorded, then
    differentiated along ``g``."""
    x = e.T.leaves[e.x_slot]
    wrt = leaves if e.x_slot in e.targets else leaves + [x]
    with enable_grad():
        gs = api.grad_op_by_op(e.out, wrt, create_graph=True, retain_graph=True, allow_unused=True)
        gi = gs[e.targets.index(e.x_slot) if e.x_slot in e.targets else -1]
        hs = api.grad_op_by_op(gi, leaves, grad_outputs=g.reshape(gi.shape), create_graph=create_graph,
                               retain_graph=True, allow_unused=True)
    return [Tensor._wrap(np.zeros(l.shape)) if h is None else h for h, l in zip(hs, leaves)]


# (it keeps no value: its reverse reads the original graph's, so the gradient may change in place)
_GRAD_OF = _h.host_op("grad_of", "GradOfBackward", _forward, _reverse, 0, entry=True, array_reverse=_array_reverse)
api.FUSED_GRAD[0] = attempt
