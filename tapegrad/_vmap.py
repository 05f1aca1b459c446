"""``vmap`` (``torch.func.vmap``, ``torch.vmap``): a function mapped over a dimension
of its inputs, by running it once per index and stacking the results.

The loop is PyTorch's semantics without its batching rules: each call sees one
slice (``x[..., i, ...]`` at ``in_dim``), so any function works, ``.item()`` and data-dependent
control flow included, and the transforms compose with it as with any function
(``vmap(grad(f))`` gives per-sample gradients, ``grad`` of a ``vmap``ped function
differentiates through the slices and the stack).  It costs one call per index.
"""
import functools

from . import creation as C
from . import functions as F
from .core import random as _random
from .core.tensor import Tensor

__all__ = ["vmap"]

_RANDOMNESS = ("error", "different", "same")


def _name(func):
    return getattr(func, "__name__", repr(func))


def _leaves(tree, spec, where):
    """``[(tensor or value, in_dim)]`` of ``tree`` with the in_dims ``spec`` (an int or
    None for the whole subtree, or a tuple/list/dict matching its structure)."""
    if isinstance(spec, (tuple, list)) or isinstance(spec, dict):
        if isinstance(spec, dict) != isinstance(tree, dict) or \
                (isinstance(tree, (tuple, list)) and len(tree) != len(spec)) or \
                (isinstance(tree, dict) and set(tree) != set(spec)) or not isinstance(tree, (tuple, list, dict)):
            raise ValueError(where + "in_dims is not compatible with the structure of `inputs`.")
        items = zip(tree.values(), spec.values()) if isinstance(tree, dict) else zip(tree, spec)
        return [leaf for t, s in items for leaf in _leaves(t, s, where)]
    if spec is not None and (not isinstance(spec, int) or isinstance(spec, bool)):
        raise ValueError(where + "expected `in_dims` to be int or a (potentially nested) tuple matching the structure "
                         "of inputs, got: %s." % type(spec))
    if isinstance(tree, (tuple, list)):
        return [leaf for t in tree for leaf in _leaves(t, spec, where)]
    if isinstance(tree, dict):
        return [leaf for t in tree.values() for leaf in _leaves(t, spec, where)]
    return [(tree, spec)]


def _rebuild(tree, values):
    """``tree`` with its leaves replaced, in order, by the iterator ``values``."""
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(_rebuild(t, values) for t in tree))
    if isinstance(tree, (tuple, list)):
        return type(tree)(_rebuild(t, values) for t in tree)
    if isinstance(tree, dict):
        return {k: _rebuild(t, values) for k, t in tree.items()}
    return next(values)


def _outputs(tree):
    if isinstance(tree, (tuple, list)):
        return [leaf for t in tree for leaf in _outputs(t)]
    if isinstance(tree, dict):
        return [leaf for t in tree.values() for leaf in _outputs(t)]
    return [tree]


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``func`` mapped over dimension ``in_dims`` of its tensor arguments (an int for
    all, None for an argument not mapped, or a nested tuple matching the arguments),
    its outputs stacked along ``out_dims``.  ``randomness``: "error" (a random draw
    from the default generator raises), "different" (each call draws its own),
    "same" (each call draws the same numbers).  ``chunk_size`` is accepted (the
    calls run one at a time)."""
    if randomness not in _RANDOMNESS:
        raise RuntimeError("Only allowed values for randomness are 'error', 'different', or 'same'. Got %s"
                           % randomness)

    @functools.wraps(func)
    def mapped(*args, **kwargs):
        where = "vmap(%s, in_dims=%s, ...)(<inputs>): " % (_name(func), in_dims)
        spec = in_dims
        if isinstance(spec, (tuple, list)) and len(spec) != len(args):
            raise ValueError(where + "in_dims is not compatible with the structure of `inputs`.")
        leaves = _leaves(tuple(args), tuple(spec) if isinstance(spec, (tuple, list)) else spec, where)
        sizes = []
        for value, d in leaves:
            if d is None:
                continue
            if not isinstance(value, Tensor):
                raise ValueError(where + "Got in_dim=%d for an input but the input is of type %s. We cannot vmap "
                                 "over non-Tensor arguments, please use None as the respective in_dim"
                                 % (d, type(value)))
            if not -value.ndim <= d < value.ndim:
                raise ValueError(where + "Got in_dim=%d for some input, but that input is a Tensor of "
                                 "dimensionality %d so expected in_dim to satisfy -%d <= in_dim < %d."
                                 % (d, value.ndim, value.ndim, value.ndim))
            sizes.append(value.shape[d])
        if not sizes:
            raise ValueError("vmap: Expected at least one Tensor to vmap over")
        if len(set(sizes)) > 1:
            raise ValueError("vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                             "%s for the mapped dimension" % sizes)
        n = sizes[0]

        def call(i):
            # (index 0 of zeros of a slice's shape, when there is no slice: the outputs' shapes)
            picked = [v if d is None else (v[(slice(None),) * (d % v.ndim) + (i,)] if n else C.zeros(
                v.shape[:d % v.ndim] + v.shape[d % v.ndim + 1:], dtype=v.dtype)) for v, d in leaves]
            return func(*_rebuild(tuple(args), iter(picked)), **kwargs)

        results = []
        state = _random.default_generator.get_state() if randomness != "different" else None
        for i in range(max(n, 1)):
            if randomness == "same":
                _random.default_generator.set_state(state)
            out = call(i)
            if randomness == "error":
                after = _random.default_generator.get_state()
                if not F.equal(after, state):
                    raise RuntimeError("vmap: called random operation while in randomness error mode. Please either "
                                       "use the 'same' or 'different' randomness flags on vmap or perform the "
                                       "randomness operation out of vmap")
            results.append(out)
        first = results[0]
        outs = [_outputs(r) for r in results]
        dims = out_dims
        if isinstance(dims, (tuple, list)):
            if len(dims) != len(outs[0]):
                raise ValueError("vmap(%s, ...): out_dims is not compatible with the structure of `outputs`. out_dims "
                                 "has %d entries but outputs has %d." % (_name(func), len(dims), len(outs[0])))
        else:
            dims = [dims] * len(outs[0])
        stacked = []
        for k, d in enumerate(dims):
            column = [o[k] for o in outs]
            if d is None:
                stacked.append(column[0])
                continue
            if not isinstance(column[0], Tensor):
                raise ValueError("vmap(%s, ...): `%s` must only return Tensors, got type %s. Did you mean to set "
                                 "out_dims= to None for output?" % (_name(func), _name(func), type(column[0])))
            if n == 0:
                shape = list(column[0].shape)
                shape.insert(d % (len(shape) + 1), 0)
                stacked.append(C.zeros(tuple(shape), dtype=column[0].dtype))
            else:
                stacked.append(F.stack(column, d))
        return _rebuild(first, iter(stacked))
    return mapped
