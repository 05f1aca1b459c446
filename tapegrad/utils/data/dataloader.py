"""``DataLoader`` (``torch.utils.data.dataloader``): batches of a dataset, drawn by a
sampler and assembled by ``collate_fn``, with PyTorch's arguments and checks.

Loading happens in the main process.  ``num_workers > 0`` is accepted and loads
there too: a map-style dataset gives the batches PyTorch's workers give (in order),
an iterable dataset gives each of its items once (``get_worker_info()`` is None, as
in PyTorch's main process, so a dataset that splits itself among workers does not
split), and ``worker_init_fn`` is not called, there being no worker.  ``pin_memory``
is accepted and warns, as PyTorch does without an accelerator.
"""
import math
import multiprocessing
import warnings

import numpy as np

from ...core import random as _random
from . import _collate
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "get_worker_info"]


def get_worker_info():
    """Information about the data-loading worker this runs in: None, as in PyTorch's
    main process (tapegrad loads in the main process)."""
    return None


class _InfiniteConstantSampler(Sampler):
    """The sampler of an iterable dataset: None for ever (the dataset says when to stop)."""

    def __iter__(self):
        while True:
            yield None


class DataLoader:
    """Iterate over ``dataset`` in batches of ``batch_size`` (``None``: one sample at a
    time, not collated), in order or shuffled (``shuffle=True``, drawing from
    ``generator``), or as ``sampler`` / ``batch_sampler`` say; ``drop_last`` drops a
    short last batch; ``collate_fn`` (default ``default_collate``) makes a batch of a
    list of samples."""

    _initialized = False

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        elif num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (False, None):
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 "shuffle={}".format(shuffle))
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 "sampler={}".format(sampler))
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 "got batch_sampler={}".format(batch_sampler))
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = _collate.default_collate if self._auto_collation else _collate.default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._IterableDataset_len_called = None
        self._initialized = True

    @property
    def multiprocessing_context(self):
        return self._multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context):
        if context is not None:
            if self.num_workers <= 0:
                raise ValueError("multiprocessing_context can only be used with multi-process loading (num_workers "
                                 "> 0), but got num_workers={}".format(self.num_workers))
            if isinstance(context, str):
                methods = multiprocessing.get_all_start_methods()
                if context not in methods:
                    raise ValueError("multiprocessing_context option should specify a valid start method in {!r}, "
                                     "but got multiprocessing_context={!r}".format(methods, context))
                context = multiprocessing.get_context(context)
            if not isinstance(context, multiprocessing.context.BaseContext):
                raise TypeError("multiprocessing_context option should be a valid context object or a string "
                                "specifying the start method, but got multiprocessing_context={}".format(context))
        self._multiprocessing_context = context

    def __setattr__(self, name, value):
        if self._initialized and name in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                                          "persistent_workers"):
            raise ValueError("{} attribute should not be set after {} is initialized"
                             .format(name, type(self).__name__))
        super().__setattr__(name, value)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        return _DataLoaderIter(self)

    def __len__(self):
        if self._iterable:
            n = self._IterableDataset_len_called = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
            return n
        return len(self._index_sampler)


class _DataLoaderIter:
    """One pass over a DataLoader."""

    def __init__(self, loader):
        self._dataset = loader.dataset
        self._iterable = loader._iterable
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._collate_fn = loader.collate_fn
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        if loader.pin_memory:
            if loader.pin_memory_device:
                warnings.warn("pin_memory_device is deprecated, the current accelerator will be used as the device,"
                              "ignore pin_memory_device='{}'.".format(loader.pin_memory_device), stacklevel=3)
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, then device pinned "
                          "memory won't be used.", stacklevel=3)
        self._index_sampler = loader._index_sampler
        self._sampler_iter = iter(self._index_sampler)
        # (PyTorch draws the workers' base seed from the generator at each pass: so does this)
        self._base_seed = int(_random.generator(loader.generator, "DataLoader").integers(
            -(1 << 63), 1 << 63, dtype=np.int64))
        self._dataset_iter = iter(self._dataset) if self._iterable else None
        self._ended = False
        self._num_yielded = 0

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._index_sampler)

    def _fetch_map(self, index):
        if self._auto_collation:
            many = getattr(self._dataset, "__getitems__", None)
            data = many(index) if callable(many) else [self._dataset[i] for i in index]
        else:
            data = self._dataset[index]
        return self._collate_fn(data)

    def _fetch_iterable(self, index):
        if self._ended:
            raise StopIteration
        if not self._auto_collation:
            return self._collate_fn(next(self._dataset_iter))
        data = []
        for _ in index:
            try:
                data.append(next(self._dataset_iter))
            except StopIteration:
                self._ended = True
                break
        if not data or (self._drop_last and len(data) < len(index)):
            raise StopIteration
        return self._collate_fn(data)

    def __next__(self):
        index = next(self._sampler_iter)
        out = self._fetch_iterable(index) if self._iterable else self._fetch_map(index)
        self._num_yielded += 1
        if self._iterable and self._IterableDataset_len_called is not None \
                and self._num_yielded > self._IterableDataset_len_called:
            warnings.warn("Length of IterableDataset {} was reported to be {}(when accessing len(dataloader)), but "
                          "{} samples have been fetched. ".format(self._dataset, self._IterableDataset_len_called,
                                                                  self._num_yielded), stacklevel=2)
        return out
