"""``tg.record``: a recorded tape of a numeric function (``RecordedTape``), its
replay and gradients, and ``save`` / ``tg.load_tape``."""
import numpy as np

from .. import _version
from ..autograd import engine as _engine
from ..core import tape as _tp
from ..core.registry import NoForwardRule
from ..core.tensor import Tensor
from . import tapefile
from .captured import discover
from .compile import _check_fuse, _show
from .recording import _record_call
from .session import NotReplayable, TapeDivergence, _Rerecord, _is_array_arg, _unflatten

FORMAT_VERSION = 1


# -- tg.record: a tape for numeric scripts ---------------------------------------------
class RecordedTape:
    """One recording of a function of arrays (``tg.record``, ``tg.load_tape``).  ``tape(*args)``
    replays the forward pass; ``value_and_grad``/``gradient``/``vjp``
    differentiate with respect to the floating-point array arguments."""

    def __init__(self, recording):
        self._R = recording
        self._programs = {}     # its forward-over-reverse programs, found without their key (one structure)

    @property
    def num_entries(self):
        return self._R.n

    def __repr__(self):
        f = self.fusion
        fused = (", fused into %d loops (%d entries, %d bytes not written)" % (f["groups"], f["entries"],
                                                                             f["bytes_saved"])
                 if f["fused"] else "")
        return "<tapegrad.RecordedTape of %d entries, %d guards%s>" % (self._R.n, len(self._R.guards), fused)

    @property
    def fusion(self):
        """What fusion did with this tape at its last replay (``Recording.fusion``)."""
        return getattr(self, "_last", self._R).fusion()

    def _replay(self, args, R=None):
        R = self._R if R is None else R
        self._last = R          # (what ``fusion`` reports: the variant of the last replay)
        if len(args) != R.nargs:
            raise TypeError("this tape takes %d arguments (%d given)" % (R.nargs, len(args)))
        arrays = []
        for i, a in enumerate(args):
            arr = np.asarray(a._data if isinstance(a, Tensor) else a)
            shape, dtype = R.arg_meta[i]
            if arr.shape != shape:
                raise ValueError("argument %d has shape %s; the tape was recorded with %s" % (i, arr.shape, shape))
            if arr.dtype != dtype:
                arr = arr.astype(dtype)
            arrays.append(arr)
        arrays = R.with_views(arrays)
        if R.captures is not None:
            g = R.captures.failing(args, {})
            if g is not None:
                raise TapeDivergence("the recorded tape assumes what its function read from outside its arguments: "
                                     "%s (record it again)" % R.captures.describe(g, args, {}))
        bad = R.check_args(arrays)
        if bad is None:
            try:
                vals = R.forward(arrays)
            except _Rerecord:
                raise TapeDivergence("a tensor the function captured changed shape, dtype or requires_grad "
                                     "since the recording") from None
            bad = R.check_guards(vals, arrays)
        if bad is not None:
            where, old, new = bad
            raise TapeDivergence("the recorded tape diverges at %s: recorded %r, now %r"
                                 % (where, _show(old), _show(new)))
        return arrays, vals

    def __call__(self, *args):
        arrays, vals = self._replay(args)
        return _unflatten(self._R.out_template, [self._R.value_of(r, vals, arrays) if r[0] != "object"
                                                 else r[1]._data for r in self._R.out_refs])

    def _grad_args(self, argnums):
        """(recording, selected argument indices, whether one gradient is returned
        bare) for ``argnums`` (None: every floating-point argument)."""
        R = self._R
        if argnums is None:
            return R, [i for i, (_, dt) in enumerate(R.arg_meta) if dt.kind == "f"], None
        single = type(argnums) is int or isinstance(argnums, np.integer)
        nums = (argnums,) if single else argnums
        if not single and (not isinstance(nums, tuple) or not all(type(a) is int or isinstance(a, np.integer)
                                                                  for a in nums)):
            raise RuntimeError("argnums must be int or Tuple[int, ...], got: %s" % type(argnums))
        if not nums:
            raise RuntimeError("argnums must be non-empty")
        picked = []
        for a in nums:
            a = int(a)
            if not -R.nargs <= a < R.nargs:
                raise RuntimeError("Got argnum=%d, but only %d positional inputs" % (a, R.nargs))
            picked.append(a % R.nargs)
        if len(set(picked)) != len(picked):
            raise RuntimeError("argnums elements must be unique, got %r" % (argnums,))
        for a in picked:
            if R.arg_meta[a][1].kind != "f":
                raise RuntimeError("only Tensors of floating point dtype can require gradients (argument %d has "
                                   "dtype %s)" % (a, R.arg_meta[a][1]))
        key = tuple(sorted(picked))
        if key == tuple(i for i, k in enumerate(R.arg_kinds) if k in ("leaf", "nonleaf")):
            return R, picked, single
        variants = self.__dict__.setdefault("_variants", {})
        V = variants.get(key)
        if V is None:
            V = variants[key] = R.with_grad_args(key)
        return V, picked, single

    def _replayed_tape(self, args, argnums, what):
        """Replay for differentiating: (recording, picked argument indices, whether one
        gradient is returned bare, the arrays, the leaves (fresh tensors at the picked
        arguments), the replayed tape, the output's slot and value)."""
        R, picked, single = self._grad_args(argnums)
        arrays, vals = self._replay(args, R)
        if len(R.out_refs) != 1 or R.out_refs[0][0] != "slot":
            raise RuntimeError("%s need a function returning one tensor" % what)
        chosen = set(picked)
        leaves = [Tensor._wrap(a) if i in chosen else a for i, a in enumerate(arrays)]
        for t in leaves:
            if isinstance(t, Tensor):
                t._requires_grad = True
        T = R.tape_for(vals, arrays, leaves)
        s = R.out_refs[0][1]
        return R, picked, single, arrays, leaves, T, s, vals[s]

    def _differentiate(self, args, cotangent, argnums=None):
        R, picked, single, arrays, leaves, T, s, y = self._replayed_tape(args, argnums,
                                                                        "value_and_grad/gradient/vjp")
        chosen = set(picked)
        if cotangent is None:
            if y.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs; use vjp")
            seed = np.ones(1)
        else:
            seed = np.asarray(cotangent, np.float64).reshape(-1)
            if seed.size != y.size:
                raise ValueError("cotangent has %d elements, the output %d" % (seed.size, y.size))
        if R.rg[s]:
            out = Tensor._recorded(y, T, s, T.versions[s])
            if getattr(self._R, "checked", False):
                # a tape from a file: the NumPy reverse, whose indexing is bounds-checked
                # (the compiled sweep trusts the tape's indices)
                _engine._interpret([(out, seed)], False, None, True)
            else:
                _engine.run_backward([(out, seed)], False)      # into the fresh leaves' .grad (the replay plan's path)
        grads = []
        for i in picked:
            g = leaves[i].grad if R.rg[s] else None
            grads.append(np.zeros(arrays[i].shape, arrays[i].dtype) if g is None else g._data)
        if argnums is None:
            grads = [grads[picked.index(i)] if i in chosen else None for i in range(len(arrays))]
            return y, (grads[0] if len(grads) == 1 else tuple(grads))
        return y, (grads[0] if single else tuple(grads))

    def value_and_grad(self, *args, argnums=None):
        """(value as a float, gradient) for one argument, (value, tuple of gradients) for several.
        ``argnums`` (an int or a tuple, as in ``torch.func``): differentiate with respect
        to those arguments only (one gradient for an int, a tuple for a tuple); the
        others are data, which the reverse sweep does not reach."""
        y, grads = self._differentiate(args, None, argnums)
        return float(y.reshape(-1)[0]), grads

    def gradient(self, *args, argnums=None):
        return self.value_and_grad(*args, argnums=argnums)[1]

    def vjp(self, args, cotangent, argnums=None):
        """(output, vector-Jacobian products) of the output with ``cotangent``."""
        args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
        return self._differentiate(args, cotangent, argnums)

    # -- forward mode and second order (autograd.tangent), on the replayed tape --
    @property
    def _checked(self):
        # a tape from a file (``load_tape``): NumPy's bounds-checked walks, no compiled program
        return getattr(self._R, "checked", False)

    def _walkable(self, args, argnums):
        """(picked argument indices, whether one is returned bare, the arrays, the tape, the
        output's slot and value, each picked argument's leaf slot or None)."""
        args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
        R, picked, single, arrays, leaves, T, s, y = self._replayed_tape(args, argnums, "jvp/hvp/jacobian/hessian")
        slot_of = {id(t): sl for sl, t in T.leaves.items()}
        ins = [slot_of.get(id(leaves[i])) if R.rg[s] else None for i in picked]
        if argnums is None:
            single = len(picked) == 1
        return picked, single, arrays, T, s, np.asarray(y), ins

    @staticmethod
    def _directions(vs, picked, arrays, single, what):
        vs = (vs,) if single and not isinstance(vs, (tuple, list)) else tuple(vs)
        if len(vs) != len(picked):
            raise ValueError("%s: %d tensors given for %d differentiated arguments" % (what, len(vs), len(picked)))
        out = []
        for v, i in zip(vs, picked):
            v = np.asarray(v._data if isinstance(v, Tensor) else v, np.float64)
            if v.shape != arrays[i].shape:
                raise ValueError("%s: argument %d has shape %s, its direction %s" % (what, i, arrays[i].shape,
                                                                                     v.shape))
            out.append(v.reshape(1, -1))
        return out

    def jvp(self, args, tangents, argnums=None):
        """(output, Jacobian-vector product): ``tangents`` one array per differentiated
        argument (one bare array for one), pushed forward through the tape in one pass."""
        from ..autograd import tangent as TG
        from ..autograd import tangent_program as TP
        picked, single, arrays, T, s, y, ins = self._walkable(args, argnums)
        vs = self._directions(tangents, picked, arrays, single, "jvp")
        seeds = {sl: v for sl, v in zip(ins, vs) if sl is not None}
        t = None
        if seeds and min(seeds) <= s:
            try:
                # (compiled: None until ready)
                got = None if self._checked else TP.first_order(T, seeds, (s,), self._programs)
                t = got[s] if got is not None else TG.tangents(T, seeds, s).tans.get(s)
            except NoForwardRule:
                t = _reverse_jvp(T, s, y, ins, vs, self._checked)
        return y, (np.zeros(y.shape) if t is None else t.reshape(y.shape)).astype(np.result_type(y.dtype, np.float32))

    def _second(self, args, directions, argnums, what):
        """(value, picked, single, arrays, {picked position: (1 + K, n) batch})."""
        from ..autograd import tangent as TG
        from ..autograd import tangent_program as TP
        picked, single, arrays, T, s, y, ins = self._walkable(args, argnums)
        if y.size != 1:
            raise RuntimeError("The Tensor returned by the function given to %s should contain a single element"
                               % what)
        dirs = directions(picked, arrays, single)
        K = next(iter(dirs)).shape[0] if dirs else 0
        seeds = {sl: d for sl, d in zip(ins, dirs) if sl is not None}
        got = {}
        if seeds and min(seeds) <= s:
            try:
                # (None until compiled)
                res = None if self._checked else TP.second_order(T, seeds, list(seeds), s, self._programs)
                if res is None:
                    seed = np.zeros((1 + K, 1))
                    seed[0] = 1.0
                    res = TG.reverse(TG.tangents(T, seeds, s), {s: seed}, list(seeds), second=True)
            except NoForwardRule:
                res = _reverse_second(T, s, y, seeds, self._checked)
            got = {j: res[sl] for j, sl in enumerate(ins) if sl is not None and res.get(sl) is not None}
        return float(y.reshape(-1)[0]), picked, single, arrays, got

    def hvp(self, args, v, argnums=None):
        """(value, Hessian-vector product) of a scalar function: one tangent pass and one
        forward-over-reverse pass over the replayed tape; ``v`` as ``jvp``'s tangents."""
        y, picked, single, arrays, got = self._second(
            args, lambda picked, arrays, single: self._directions(v, picked, arrays, single, "hvp"), argnums, "hvp")
        out = [got[j][1].reshape(arrays[i].shape) if j in got else np.zeros(arrays[i].shape)
               for j, i in enumerate(picked)]
        return y, (out[0] if single else tuple(out))

    def hessian(self, args, argnums=None):
        """The Hessian of a scalar function (``(n, n)`` shaped ``arg.shape * 2``; for several
        arguments a tuple of tuples of blocks), from every direction in one pass."""
        offsets = []

        def directions(picked, arrays, single):
            sizes = [arrays[i].size for i in picked]
            off = np.cumsum([0] + sizes)
            offsets.append(off)
            eye = np.eye(int(off[-1]))
            return [eye[:, off[j]:off[j + 1]] for j in range(len(picked))]
        y, picked, single, arrays, got = self._second(args, directions, argnums, "hessian")
        off = offsets[0]
        blocks = tuple(tuple((got[a][1 + off[b]:1 + off[b + 1]].T if a in got
                              else np.zeros((arrays[i].size, arrays[j].size))).reshape(arrays[i].shape
                                                                                        + arrays[j].shape)
                             for b, j in enumerate(picked)) for a, i in enumerate(picked))
        return blocks[0][0] if single else blocks

    def jacobian(self, args, argnums=None):
        """The Jacobian of the output with respect to the differentiated arguments
        (``out.shape + arg.shape``; a tuple for several), all input directions in one
        tangent pass."""
        from ..autograd import tangent as TG
        picked, single, arrays, T, s, y, ins = self._walkable(args, argnums)
        sizes = [arrays[i].size for i in picked]
        off = np.cumsum([0] + sizes)
        eye = np.eye(int(off[-1]))
        seeds = {sl: eye[:, off[j]:off[j + 1]] for j, sl in enumerate(ins) if sl is not None and sizes[j]}
        t = None
        if seeds and min(seeds) <= s:
            try:
                t = TG.tangents(T, seeds, s).tans.get(s)
            except NoForwardRule:
                t = _reverse_jacobian(T, s, y, seeds, self._checked)
        out = [(np.zeros((y.size, sizes[j])) if t is None else t[off[j]:off[j + 1]].T).reshape(y.shape
                                                                                             + arrays[i].shape)
               for j, i in enumerate(picked)]
        return out[0] if single else tuple(out)

    # -- saving ---------------------------------------------------------------
    def save(self, path):
        """Write the tape to ``path`` in tapegrad's data-only tape file format (an
        ``.npz`` of numeric arrays and a JSON header, see ``tapegrad.replay.tapefile``):
        ``tg.load_tape`` reads it back without executing anything from the file."""
        tapefile.save(self._R, path, _version.__version__)

    # (in-memory pickling, for trusted processes such as Dask's workers; files use ``save``)
    def __getstate__(self):
        return {"format": FORMAT_VERSION, "recording": self._R}

    def __setstate__(self, st):
        v = st.get("format") if isinstance(st, dict) else None
        if v != FORMAT_VERSION:
            raise ValueError("this tape was pickled in format %r; this tapegrad reads format %d" % (v, FORMAT_VERSION))
        self._R = st["recording"]
        self._programs = {}


# -- the reverse-mode paths of a tape with an op without a forward-mode rule ----------
# (eig, second order through a tg.autograd.Function, det of a singular matrix, svd full of
# a matrix that is not square, ...): the same results from reverse
# passes over the replayed tape, as ``functional`` does on a live one: slower (a
# differentiable reverse, or one reverse pass per output element), never refused.
def _reverse_passes(T, s, y, slots, work, checked):
    """``work(out, leaves, grad)`` with the output of slot ``s`` as a tensor on ``T`` and
    the leaf tensors at ``slots``; the next operations record on a new tape after.
    ``checked`` (a tape from a file): every pass is the differentiable walk, whose
    indexing is NumPy's, bounds-checked, rather than the compiled sweep."""
    from ..autograd.api import grad as _grad
    grad = _grad if not checked else lambda *a, **k: _grad(*a, **dict(k, create_graph=True))
    out = Tensor._recorded(y, T, s, T.versions[s])
    try:
        return work(out, [T.leaves[sl] for sl in slots], grad)
    finally:
        _tp.rotate()


def _flat(g, n):
    return np.zeros(n) if g is None else np.asarray(g._data, np.float64).reshape(-1)


def _reverse_jvp(T, s, y, ins, vs, checked):
    """J v by the double-vjp trick: the vjp with a cotangent u that requires grad is
    linear in u, and its vjp with v is (J v) . u's gradient."""
    pairs = [(sl, v) for sl, v in zip(ins, vs) if sl is not None]

    def work(out, leaves, grad):
        u = Tensor._wrap(np.zeros(y.shape))
        u._requires_grad = True
        gs = grad(out, leaves, grad_outputs=u, create_graph=True, allow_unused=True)
        used = [(g, Tensor._wrap(v.reshape(g.shape))) for g, (_, v) in zip(gs, pairs)
                if g is not None and g.requires_grad]
        if not used:
            return None
        jv, = grad([g for g, _ in used], u, grad_outputs=[v for _, v in used], allow_unused=True)
        return None if jv is None else jv._data
    return _reverse_passes(T, s, y, [sl for sl, _ in pairs], work, checked)


def _reverse_second(T, s, y, seeds, checked):
    """{slot: (1 + K, n)}: the gradient in row 0 and H times each of the K directions
    ``seeds`` holds (by slot) after it, by double backward: the gradient recorded once,
    then one reverse pass through it per direction."""
    slots = list(seeds)
    K = next(iter(seeds.values())).shape[0]

    def work(out, leaves, grad):
        gs = grad(out, leaves, create_graph=True, allow_unused=True)
        res = {sl: np.zeros((1 + K, leaf.numel())) for sl, leaf in zip(slots, leaves)}
        for sl, leaf, g in zip(slots, leaves, gs):
            res[sl][0] = _flat(g, leaf.numel())
        used = [(sl, g) for sl, g in zip(slots, gs) if g is not None and g.requires_grad]
        for k in range(K if used else 0):
            hv = grad([g for _, g in used], leaves,
                      grad_outputs=[Tensor._wrap(seeds[sl][k].reshape(g.shape)) for sl, g in used],
                      retain_graph=k < K - 1, allow_unused=True)
            for sl, leaf, h in zip(slots, leaves, hv):
                res[sl][1 + k] = _flat(h, leaf.numel())
        return res
    return _reverse_passes(T, s, y, slots, work, checked)


def _reverse_jacobian(T, s, y, seeds, checked):
    """The (K, y.size) tangent of the output for the unit directions ``seeds`` holds:
    the Jacobian's transpose, one reverse pass per output element."""
    slots = list(seeds)

    def work(out, leaves, grad):
        rows = []
        for k in range(y.size):
            e = np.zeros(y.size)
            e[k] = 1.0
            gs = grad(out, leaves, grad_outputs=Tensor._wrap(e.reshape(y.shape)),
                      retain_graph=k < y.size - 1, allow_unused=True)
            # (the seeds are unit directions: each slot's block of the tangent is this row)
            rows.append(sum(seeds[sl] @ _flat(g, leaf.numel()) for sl, leaf, g in zip(slots, leaves, gs)))
        return np.array(rows).T.reshape(-1, y.size) if rows else None
    return _reverse_passes(T, s, y, slots, work, checked)


def load_tape(path, trusted=False):
    """A tape saved by ``RecordedTape.save``.  The file is parsed as data (JSON and NumPy
    arrays without pickle) and checked entry by entry: a crafted, truncated or
    foreign file raises ``ValueError`` and nothing from it runs.  The tape then
    replays with NumPy's bounds-checked forward and reverse passes; ``trusted=True``
    (a file you wrote yourself) lets it use the compiled kernels, which are faster
    and do not check the tape's indices."""
    R = tapefile.load(path)
    if not trusted:
        R.checked = True
        R.arena = False
        R.scalar = False
    return RecordedTape(R)


def _record_arg(i, a):
    """An argument of ``tg.record`` as an array: a tape is a function of arrays, and
    replays convert its arguments so (a number is a 0-d array, a varying input)."""
    if _is_array_arg(a):
        return a
    arr = np.asarray(a) if not isinstance(a, (str, bytes)) else None
    if arr is None or arr.dtype.kind not in "biuf":
        raise TypeError("tg.record takes arrays, tensors or numbers as arguments (argument %d is %s); pass "
                        "other values to the function through a closure" % (i, type(a).__name__))
    return arr


def record(fn, *example_args, fuse="auto"):
    """Record ``fn`` on ``example_args`` (arrays or tensors; every floating-point
    one is differentiated) and return the ``RecordedTape``.  Raises ``NotReplayable`` when
    the function does something a tape cannot replay.  ``fuse`` as ``tg.compile``'s."""
    _check_fuse(fuse)
    args = [_record_arg(i, a) for i, a in enumerate(example_args)]
    caps = discover(fn, args, {})
    _, R, why = _record_call(fn, args, {}, grad_arrays=True, check_now=True, fuse=fuse)
    if R is not None and len(caps):
        g = caps.failing(args, {})
        if g is not None:
            R, why = None, "it changes %s while it runs (a replay would not)" % g.label
        R_caps = caps
    else:
        R_caps = None
    if R is None:
        raise NotReplayable("cannot record %s for replay: %s" % (getattr(fn, "__name__", fn), why))
    R.captures = R_caps
    return RecordedTape(R)
