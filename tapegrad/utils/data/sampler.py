"""Samplers (``torch.utils.data.sampler``): iterables of dataset indices (or, for
``BatchSampler``, of lists of indices).  The random ones draw from tapegrad's
generators: reproducible under ``tg.manual_seed`` or a ``generator=``, but not the
numbers PyTorch's generator gives."""
import itertools

import numpy as np

from ... import creation as _creation
from ...core import random as _random
from ...core.tensor import Tensor

__all__ = ["BatchSampler", "RandomSampler", "Sampler", "SequentialSampler", "SubsetRandomSampler",
           "WeightedRandomSampler"]


class Sampler:
    """Base class: a subclass defines ``__iter__`` (and ``__len__`` where it has one)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError

    def __class_getitem__(cls, item):
        return cls


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


def _fresh_generator():
    """A generator seeded from the default one: what a sampler without ``generator``
    uses for one pass (PyTorch draws the seed the same way, from its default generator)."""
    seed = int(_random.generator(None, "RandomSampler").integers(-(1 << 63), 1 << 63, dtype=np.int64))
    return _random.Generator().manual_seed(seed)


class RandomSampler(Sampler):
    """A random permutation of the indices (repeated and cut to ``num_samples``), or
    ``num_samples`` indices drawn with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError("replacement should be a boolean value, but got replacement={}".format(self.replacement))
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got num_samples={}"
                             .format(self.num_samples))

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        gen = self.generator if self.generator is not None else _fresh_generator()
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from _creation.randint(0, n, (32,), generator=gen).tolist()
            yield from _creation.randint(0, n, (self.num_samples % 32,), generator=gen).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from _creation.randperm(n, generator=gen).tolist()
            yield from _creation.randperm(n, generator=gen).tolist()[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices``, in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in _creation.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got num_samples={}"
                             .format(num_samples))
        if not isinstance(replacement, bool):
            raise ValueError("replacement should be a boolean value, but got replacement={}".format(replacement))
        w = weights._data if isinstance(weights, Tensor) else weights
        w = np.asarray(w, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError("weights should be a 1d sequence but given weights have shape {}".format(tuple(w.shape)))
        self.weights = Tensor._const(w.copy())
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        yield from _creation.multinomial(self.weights, self.num_samples, self.replacement,
                                         generator=self.generator).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size`` (the last one
    shorter, or dropped with ``drop_last``)."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got batch_size={}"
                             .format(batch_size))
        if not isinstance(drop_last, bool):
            raise ValueError("drop_last should be a boolean value, but got drop_last={}".format(drop_last))
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        it = iter(self.sampler)
        if self.drop_last:
            for batch in zip(*[it] * self.batch_size):
                yield list(batch)
        else:
            batch = list(itertools.islice(it, self.batch_size))
            while batch:
                yield batch
                batch = list(itertools.islice(it, self.batch_size))

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
