"""``tg.distributed``: two things under PyTorch's name.

* ``torch.distributed``'s answers for a program that has no process group, which
  every tapegrad program is: ``is_available()`` and ``is_initialized()`` are False,
  the queries and collectives raise PyTorch's error for a process group that was
  never initialized, and ``init_process_group`` raises (tapegrad has no
  torch.distributed backend).
* tapegrad's own data parallelism over Dask: ``DataParallel`` (and
  ``LOCAL_CLUSTER_CONFIG``), imported from ``tapegrad._dask_parallel`` on first use,
  which needs the ``dask`` extra (docs/distributed.md).
"""

__all__ = ["DataParallel", "LOCAL_CLUSTER_CONFIG", "ReduceOp", "all_gather", "all_reduce", "barrier", "broadcast",
           "destroy_process_group", "get_rank", "get_world_size", "init_process_group", "is_available",
           "is_initialized", "is_torchelastic_launched", "new_group", "reduce"]

_NO_GROUP = "Default process group has not been initialized, please make sure to call init_process_group."
_DASK_NAMES = ("DataParallel", "LOCAL_CLUSTER_CONFIG", "BLOCK_BYTES", "REDUCTIONS")


def is_available():
    """False: tapegrad has no torch.distributed backend (see ``DataParallel`` for Dask)."""
    return False


def is_initialized():
    return False


def is_torchelastic_launched():
    return False


def init_process_group(*args, **kwargs):
    raise RuntimeError("tapegrad has no torch.distributed backend, so it cannot initialize a process group; "
                       "tapegrad.distributed.DataParallel evaluates a loss and its gradient over a Dask cluster")


def _no_group(*args, **kwargs):
    raise ValueError(_NO_GROUP)


get_rank = get_world_size = barrier = all_reduce = all_gather = broadcast = reduce = new_group = _no_group
destroy_process_group = _no_group


class ReduceOp:
    """The reduction names of the collectives (which raise here)."""
    SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR, AVG = "sum", "product", "min", "max", "band", "bor", "bxor", "avg"


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        from . import _dask_parallel
    except ImportError:
        if name in _DASK_NAMES:
            raise
        raise AttributeError("module 'tapegrad.distributed' has no attribute %r" % name) from None
    try:
        return getattr(_dask_parallel, name)
    except AttributeError:
        raise AttributeError("module 'tapegrad.distributed' has no attribute %r" % name) from None
