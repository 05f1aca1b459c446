"""``default_collate`` and ``default_convert`` (``torch.utils.data._utils.collate``):
PyTorch's rules for turning a list of samples into a batch, by the type of the first
sample, recursively through mappings, named tuples and sequences."""
import collections.abc
import copy
import re

import numpy as np

from ... import functions as _F
from ...core.tensor import Tensor
from ...core.tensor import from_data as _tensor

__all__ = ["default_collate", "default_convert"]

_STR_OR_OBJECT = re.compile(r"[SaUO]")      # NumPy dtypes a tensor cannot hold

default_collate_err_msg_format = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
                                  "lists; found {}")


def _as_tensor(a):
    """``torch.as_tensor`` of a NumPy array or scalar (shares an array's memory)."""
    return Tensor._const(a) if isinstance(a, np.ndarray) else _tensor(a)


def _rebuild_mapping(elem, items):
    """``items`` (a dict) in the mapping type of ``elem`` where it can be (a plain dict else)."""
    try:
        if isinstance(elem, collections.abc.MutableMapping):
            clone = copy.copy(elem)
            clone.update(items)
            return clone
        return type(elem)(items)
    except TypeError:
        return items


def _rebuild_sequence(elem, items):
    try:
        if isinstance(elem, collections.abc.MutableSequence):
            clone = copy.copy(elem)
            for i, v in enumerate(items):
                clone[i] = v
            return clone
        return type(elem)(items)
    except TypeError:
        return list(items)


def default_convert(data):
    """A sample without batching: NumPy arrays and scalars become tensors, inside
    mappings and sequences too (a tuple becomes a list, as in PyTorch)."""
    t = type(data)
    if isinstance(data, Tensor):
        return data
    if t.__module__ == "numpy" and t.__name__ not in ("str_", "string_"):
        if t.__name__ == "ndarray" and _STR_OR_OBJECT.search(data.dtype.str) is not None:
            return data
        return _as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {k: default_convert(data[k]) for k in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):      # a named tuple
        return t(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def default_collate(batch):
    """A list of samples as one batch: tensors and NumPy arrays stacked along a new
    first dimension, Python floats a float64 tensor, ints an int64 (bools a bool)
    tensor, strings left as they are (the list or tuple of them); mappings, named tuples and sequences collated field
    by field (a tuple of fields gives a list, as in PyTorch)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _F.stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        if _STR_OR_OBJECT.search(elem.dtype.str) is not None:
            raise TypeError(default_collate_err_msg_format.format(elem.dtype))
        return default_collate([_as_tensor(b) for b in batch])
    if isinstance(elem, (np.bool_, np.number, np.object_)):
        return _tensor(np.asarray(batch))
    if isinstance(elem, float):
        return _tensor(list(batch), dtype=np.float64)
    if isinstance(elem, int):
        return _tensor(list(batch))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild_mapping(elem, {k: default_collate([d[k] for d in batch]) for k in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if not all(len(e) == size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [default_collate(s) for s in zip(*batch)]     # (strings stay the tuples zip makes)
        return columns if isinstance(elem, tuple) else _rebuild_sequence(elem, columns)
    raise TypeError(default_collate_err_msg_format.format(type(elem)))
