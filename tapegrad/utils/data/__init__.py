"""``tg.utils.data``: PyTorch's datasets, samplers and ``DataLoader``.

Batches are assembled in the main process (``num_workers > 0`` is accepted and loads
in the main process too: see ``DataLoader``); shuffling draws from tapegrad's
generators (``tg.manual_seed`` or ``generator=``), so a shuffled order is
reproducible but is not the order PyTorch's generator gives.
"""
from ._collate import default_collate, default_convert  # noqa: F401
from .dataloader import DataLoader, get_worker_info  # noqa: F401
from .distributed import DistributedSampler  # noqa: F401
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset, Subset,  # noqa: F401
                      TensorDataset, random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,  # noqa: F401
                      WeightedRandomSampler)

__all__ = ["BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler",
           "IterableDataset",
           "RandomSampler", "Sampler", "SequentialSampler", "StackDataset", "Subset", "SubsetRandomSampler",
           "TensorDataset", "WeightedRandomSampler", "default_collate", "default_convert", "get_worker_info",
           "random_split"]
