"""``DistributedSampler`` (``torch.utils.data.distributed``): the share of a dataset's
indices that one of ``num_replicas`` processes reads.

tapegrad has no process group, so ``num_replicas`` and ``rank`` must be given (without
them PyTorch asks the process group, and tapegrad raises PyTorch's error for a build
without one); with them, each rank gets PyTorch's share: the indices (shuffled per
``seed + epoch`` from tapegrad's generator) padded by repetition, or cut with
``drop_last``, to a multiple of ``num_replicas``, then every ``num_replicas``-th.
"""
import math

from ... import creation as _creation
from ...core.random import Generator
from .sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
            raise RuntimeError("Requires distributed package to be available")
        if rank >= num_replicas or rank < 0:
            raise ValueError("Invalid rank {}, rank should be in the interval [0, {}]".format(rank, num_replicas - 1))
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            indices = _creation.randperm(n, generator=Generator().manual_seed(self.seed + self.epoch)).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            indices += (indices * math.ceil(pad / len(indices)))[:pad] if pad > len(indices) else indices[:pad]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch whose shuffle ``__iter__`` draws (call it before each epoch)."""
        self.epoch = epoch
