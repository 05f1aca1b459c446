"""tg.utils.data: datasets, samplers, default_collate and DataLoader, with PyTorch's
batches (where no random numbers are drawn: tapegrad's generator is not PyTorch's),
arguments, lengths and messages."""
import collections
import warnings

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.utils.data import (BatchSampler, ChainDataset, ConcatDataset, DataLoader, Dataset, IterableDataset,
                                 RandomSampler, SequentialSampler, StackDataset, Subset, SubsetRandomSampler,
                                 TensorDataset, WeightedRandomSampler, default_collate, default_convert,
                                 get_worker_info, random_split)

Point = collections.namedtuple("Point", "x y")


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return {"x": np.array([i, i * i], dtype=np.float64), "label": i % 3, "name": "s%d" % i}

    def __len__(self):
        return self.n


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def _np(batch):
    """A batch (nested) with tensors as NumPy arrays, for comparison."""
    if hasattr(batch, "numpy") and not isinstance(batch, np.ndarray):
        return ("tensor", str(batch.dtype).replace("torch.", ""), batch.numpy().tolist())
    if isinstance(batch, dict):
        return {k: _np(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch).__name__, [_np(v) for v in batch]
    return batch


def test_tensor_dataset_and_sequential_loader():
    X = tg.arange(20.0).reshape(10, 2)
    y = tg.arange(10)
    ds = TensorDataset(X, y)
    assert len(ds) == 10
    x3, y3 = ds[3]
    assert x3.tolist() == [6.0, 7.0] and y3.item() == 3
    batches = list(DataLoader(ds, batch_size=4))
    assert len(batches) == 3 and len(DataLoader(ds, batch_size=4)) == 3
    xb, yb = batches[0]
    assert isinstance(batches[0], list)                 # (a tuple sample collates to a list, as in PyTorch)
    assert xb.shape == (4, 2) and xb.dtype == tg.float64 and yb.dtype == tg.int64
    assert yb.tolist() == [0, 1, 2, 3] and batches[2][1].tolist() == [8, 9]
    assert [b[1].tolist() for b in DataLoader(ds, batch_size=4, drop_last=True)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    with pytest.raises(AssertionError, match="^Size mismatch between tensors$"):
        TensorDataset(X, tg.arange(9))


def test_batches_equal_torchs():
    """Without shuffling, the batches (values, dtypes, structure) are PyTorch's."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader as TDataLoader

    samples = [(np.float32(i) * np.ones(3, np.float32), i, float(i) / 2, Point(i, [i, -i]), {"k": np.int16(i)},
                "w%d" % i, True) for i in range(7)]

    class L(list):
        pass

    for kw in (dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None), dict(batch_size=1)):
        ours = [_np(b) for b in DataLoader(samples, **kw)]
        theirs = [_np(b) for b in TDataLoader(samples, **kw)]
        assert ours == theirs, kw
    ds = Squares(5)
    assert [_np(b) for b in DataLoader(ds, batch_size=2)] == [_np(b) for b in TDataLoader(ds, batch_size=2)]
    # an iterable dataset: batched, drop_last, one at a time
    TStream = type("TStream", (torch.utils.data.IterableDataset,), dict(vars(Stream)))
    for kw in (dict(batch_size=4), dict(batch_size=4, drop_last=True), dict(batch_size=None)):
        assert [_np(b) for b in DataLoader(Stream(10), **kw)] == [_np(b) for b in TDataLoader(TStream(10), **kw)]
        assert len(DataLoader(Stream(10), **kw)) == len(TDataLoader(TStream(10), **kw))


def test_default_collate_rules():
    b = default_collate([{"a": np.ones(2), "b": 1.0, "c": "x", "d": (1, 2)},
                         {"a": np.zeros(2), "b": 2.5, "c": "y", "d": (3, 4)}])
    assert b["a"].tolist() == [[1.0, 1.0], [0.0, 0.0]] and b["a"].dtype == tg.float64
    assert b["b"].tolist() == [1.0, 2.5] and b["b"].dtype == tg.float64
    assert b["c"] == ["x", "y"]
    assert isinstance(b["d"], list) and b["d"][0].tolist() == [1, 3] and b["d"][1].dtype == tg.int64
    p = default_collate([Point(1.0, 2), Point(3.0, 4)])
    assert type(p) is Point and p.x.tolist() == [1.0, 3.0] and p.y.tolist() == [2, 4]
    assert default_collate([True, False]).dtype == tg.bool
    assert default_collate([np.float32(1), np.float32(2)]).dtype == tg.float32
    assert default_collate([np.arange(3, dtype=np.int32)] * 2).dtype == tg.int32
    t = default_collate([tg.ones(2), tg.zeros(2)])
    assert t.shape == (2, 2)
    with pytest.raises(RuntimeError, match="^each element in list of batch should be of equal size$"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="^default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                                        "or lists; found <class 'object'>$"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="found <U1"):
        default_collate([np.array(["a"]), np.array(["b"])])
    # default_convert: batch_size=None
    c = default_convert((np.ones(2), {"k": np.int64(3)}, "s"))
    assert isinstance(c, list) and c[0].tolist() == [1.0, 1.0] and c[1]["k"].item() == 3 and c[2] == "s"
    arr = np.arange(3.0)
    conv = default_convert(arr)
    arr[0] = 7.0
    assert conv[0].item() == 7.0                     # (as_tensor: shares the array's memory)


def test_collate_stacks_tensors_that_require_grad():
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    b = default_collate([a, a * 3])
    b.sum().backward()
    assert a.grad.tolist() == [4.0, 4.0]


def test_shuffle_is_a_permutation_and_reproducible():
    ds = TensorDataset(tg.arange(50))

    def order(**kw):
        return [i for (b,) in DataLoader(ds, batch_size=8, shuffle=True, **kw) for i in b.tolist()]

    a = order(generator=tg.Generator().manual_seed(3))
    assert sorted(a) == list(range(50)) and a != list(range(50))
    assert order(generator=tg.Generator().manual_seed(3)) == a
    assert order(generator=tg.Generator().manual_seed(4)) != a
    # without a generator: the default one, under tg.manual_seed
    tg.manual_seed(11)
    b1 = order()
    b2 = order()                 # (another epoch: another order)
    tg.manual_seed(11)
    assert order() == b1 and b1 != b2
    # one generator over epochs: each epoch a new order, the sequence reproducible
    g = tg.Generator().manual_seed(5)
    loader = DataLoader(ds, batch_size=8, shuffle=True, generator=g)
    e1 = [i for (b,) in loader for i in b.tolist()]
    e2 = [i for (b,) in loader for i in b.tolist()]
    g.manual_seed(5)
    assert [i for (b,) in loader for i in b.tolist()] == e1 and e1 != e2


def test_samplers():
    data = list(range(10))
    assert list(SequentialSampler(data)) == data and len(SequentialSampler(data)) == 10
    g = tg.Generator().manual_seed(0)
    s = RandomSampler(data, generator=g)
    assert sorted(s) == data and len(s) == 10
    s = RandomSampler(data, num_samples=25, generator=g)
    drawn = list(s)
    assert len(drawn) == 25 and len(s) == 25
    assert collections.Counter(drawn) == collections.Counter(data * 2 + drawn[20:])   # two permutations, then 5
    assert sorted(drawn[:10]) == data and sorted(drawn[10:20]) == data and len(set(drawn[20:])) == 5
    r = list(RandomSampler(data, replacement=True, num_samples=70, generator=g))
    assert len(r) == 70 and set(r) <= set(data) and len(set(r)) < 70
    sub = list(SubsetRandomSampler([3, 5, 7, 9], generator=g))
    assert sorted(sub) == [3, 5, 7, 9] and len(SubsetRandomSampler([3, 5])) == 2
    w = WeightedRandomSampler([0.0, 1.0, 3.0], 4000, generator=g)
    counts = collections.Counter(w)
    assert counts[0] == 0 and abs(counts[2] / 4000 - 0.75) < 0.03 and len(w) == 4000
    assert sorted(WeightedRandomSampler([1.0, 1.0, 1.0], 3, replacement=False, generator=g)) == [0, 1, 2]
    assert isinstance(w.weights, tg.Tensor) and w.weights.dtype == tg.float64
    assert list(BatchSampler(SequentialSampler(range(7)), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(range(7), 3, True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(range(7), 3, False)) == 3 and len(BatchSampler(range(7), 3, True)) == 2
    # samplers given to a DataLoader
    loader = DataLoader(Squares(6), batch_size=2, sampler=SubsetRandomSampler([0, 2, 4], generator=g))
    assert sorted(i for b in loader for i in b["label"].tolist()) == [0, 1, 2]
    loader = DataLoader(Squares(6), batch_sampler=[[5, 0], [1]])
    assert [b["x"][:, 0].tolist() for b in loader] == [[5.0, 0.0], [1.0]]


def test_sampler_errors_are_torchs():
    torch = pytest.importorskip("torch")
    import torch.utils.data as tud
    import tapegrad.utils.data as ours
    cases = [("RandomSampler", ([1, 2],), dict(replacement=1)),
             ("RandomSampler", ([1, 2],), dict(num_samples=0)),
             ("WeightedRandomSampler", ([1.0],), dict(num_samples=-1)),
             ("WeightedRandomSampler", ([1.0], 2), dict(replacement="yes")),
             ("WeightedRandomSampler", ([[1.0, 2.0]], 2), {}),
             ("BatchSampler", ([1, 2], 0, False), {}),
             ("BatchSampler", ([1, 2], 2, None), {})]
    for name, args, kw in cases:
        with pytest.raises((TypeError, ValueError)) as e1:
            getattr(ours, name)(*args, **kw)
        with pytest.raises((TypeError, ValueError)) as e2:
            getattr(tud, name)(*args, **kw)
        assert (type(e1.value), str(e1.value)) == (type(e2.value), str(e2.value))


@pytest.mark.parametrize("kw", [
    dict(num_workers=-1), dict(timeout=-1), dict(prefetch_factor=2), dict(persistent_workers=True),
    dict(shuffle=True, sampler=[0, 1]), dict(batch_sampler=[[0]], batch_size=2), dict(batch_sampler=[[0]], shuffle=True),
    dict(batch_size=None, drop_last=True), dict(multiprocessing_context="fork"),
    dict(num_workers=1, multiprocessing_context="nope"),
])
def test_loader_argument_errors(kw):
    with pytest.raises(ValueError) as e:
        DataLoader(Squares(3), **kw)
    try:
        import torch.utils.data as tud
    except ImportError:
        assert str(e.value)
        return
    with pytest.raises(ValueError) as te:
        tud.DataLoader(Squares(3), **kw)
    assert str(e.value) == str(te.value)


def test_iterable_dataset_loader_errors_and_len():
    with pytest.raises(ValueError, match="^DataLoader with IterableDataset: expected unspecified shuffle option, but "
                                         "got shuffle=True$"):
        DataLoader(Stream(3), shuffle=True)
    with pytest.raises(ValueError, match="expected unspecified sampler option"):
        DataLoader(Stream(3), sampler=[0])
    loader = DataLoader(Stream(5), batch_size=2)
    assert len(loader) == 3 and [b.tolist() for b in loader] == [[0, 1], [2, 3], [4]]

    class Liar(Stream):
        def __len__(self):
            return 2

    loader = DataLoader(Liar(3), batch_size=None)
    assert len(loader) == 2
    with pytest.warns(UserWarning, match="was reported to be 2"):
        assert [b for b in loader] == [0, 1, 2]      # (batch_size=None: default_convert leaves ints)


def test_loader_attributes_and_frozen_fields():
    ds = Squares(4)
    loader = DataLoader(ds, batch_size=2, shuffle=True)
    assert isinstance(loader.sampler, RandomSampler) and isinstance(loader.batch_sampler, BatchSampler)
    assert loader.batch_size == 2 and loader.dataset is ds and loader.num_workers == 0 and not loader.drop_last
    with pytest.raises(ValueError, match="^batch_size attribute should not be set after DataLoader is initialized$"):
        loader.batch_size = 3
    loader.num_workers = 0                              # (others may change)
    assert DataLoader(ds, batch_size=None).collate_fn is default_convert
    assert DataLoader(ds).collate_fn is default_collate
    it = iter(DataLoader(ds, batch_size=3))
    assert len(it) == 2 and iter(it) is it


def test_num_workers_and_pin_memory_accepted():
    """num_workers > 0 loads in the main process: the batches are the ones of num_workers=0
    (PyTorch's, for a map-style dataset); pin_memory warns as PyTorch without an accelerator."""
    ds = Squares(7)
    calls = []
    a = [_np(b) for b in DataLoader(ds, batch_size=3)]
    b = [_np(b) for b in DataLoader(ds, batch_size=3, num_workers=2, worker_init_fn=calls.append,
                                    prefetch_factor=4, persistent_workers=True, multiprocessing_context="spawn",
                                    timeout=5)]
    assert a == b and calls == []
    assert get_worker_info() is None
    with pytest.warns(UserWarning, match="^'pin_memory' argument is set as true but no accelerator is found, then "
                                         "device pinned memory won't be used.$"):
        c = [_np(b) for b in DataLoader(ds, batch_size=3, pin_memory=True)]
    assert c == a
    assert [b.tolist() for b in DataLoader(Stream(5), batch_size=2, num_workers=3)] == [[0, 1], [2, 3], [4]]


def test_datasets_combined():
    a, b = Squares(3), Squares(4)
    c = a + b
    assert isinstance(c, ConcatDataset) and len(c) == 7 and c.cumulative_sizes == [3, 7]
    assert c[3]["label"] == 0 and c[-1]["label"] == 0 and c[2]["label"] == 2
    with pytest.raises(ValueError, match="^absolute value of index should not exceed dataset length$"):
        c[-8]
    with pytest.raises(AssertionError, match="^datasets should not be an empty iterable$"):
        ConcatDataset([])
    with pytest.raises(AssertionError, match="^ConcatDataset does not support IterableDataset$"):
        ConcatDataset([a, Stream(2)])
    ch = Stream(2) + Stream(3)
    assert isinstance(ch, ChainDataset) and list(ch) == [0, 1, 0, 1, 2] and len(ch) == 5
    s = Subset(b, [3, 1])
    assert len(s) == 2 and s[0]["label"] == 0 and [d["label"] for d in s.__getitems__([0, 1])] == [0, 1]
    st = StackDataset(a, a)
    assert len(st) == 3 and st[1][0]["label"] == 1
    st = StackDataset(first=a, second=TensorDataset(tg.arange(3)))
    assert st[2]["second"][0].item() == 2
    with pytest.raises(ValueError, match="^Size mismatch between datasets$"):
        StackDataset(a, b)
    with pytest.raises(NotImplementedError, match="^Subclasses of Dataset should implement __getitem__.$"):
        Dataset()[0]


def test_random_split():
    ds = TensorDataset(tg.arange(10))
    parts = random_split(ds, [3, 7], generator=tg.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [3, 7]
    seen = sorted(p[i][0].item() for p in parts for i in range(len(p)))
    assert seen == list(range(10))
    again = random_split(ds, [3, 7], generator=tg.Generator().manual_seed(1))
    assert parts[0].indices == again[0].indices
    # fractions: floor of each, the remainder given out from the first (PyTorch's rule)
    assert [len(p) for p in random_split(ds, [0.33, 0.33, 0.34])] == [4, 3, 3]
    assert [len(p) for p in random_split(range(11), [0.5, 0.5])] == [6, 5]
    with pytest.warns(UserWarning, match="^Length of split at index 1 is 0. This might result in an empty dataset.$"):
        random_split(range(2), [0.99, 0.01])
    with pytest.raises(ValueError, match="^Sum of input lengths does not equal the length of the input dataset!$"):
        random_split(ds, [3, 3])
    with pytest.raises(ValueError, match="^Fraction at index 0 is not between 0 and 1$"):
        random_split(ds, [-0.5, 1.5])
    try:
        import torch
    except ImportError:
        return
    for lengths in ([0.33, 0.33, 0.34], [0.5, 0.5], [0.1] * 10, [0.7, 0.2, 0.1]):
        for n in (10, 11, 97):
            assert [len(p) for p in random_split(range(n), lengths)] == \
                [len(p) for p in torch.utils.data.random_split(range(n), lengths)]


def test_training_loop_with_dataloader():
    """A small regression trained through a DataLoader: the loss falls, and a run with
    the same seed is repeated exactly."""
    def train():
        tg.manual_seed(0)
        X = tg.randn(64, 3)
        y = X @ tg.tensor([1.0, -2.0, 0.5]) + 0.1
        model = tg.nn.Linear(3, 1)
        opt = tg.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(TensorDataset(X, y), batch_size=16, shuffle=True)
        losses = []
        for _ in range(20):
            for xb, yb in loader:
                opt.zero_grad()
                loss = ((model(xb).squeeze(1) - yb) ** 2).mean()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return losses

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        losses = train()
    assert losses[-1] < 1e-3 * losses[0]
    assert train() == losses


def test_distributed_sampler():
    from tapegrad.utils.data import DistributedSampler
    ds = list(range(10))
    shares = [list(DistributedSampler(ds, num_replicas=3, rank=r, shuffle=False)) for r in range(3)]
    assert shares == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]          # (padded by repetition)
    assert [list(DistributedSampler(ds, 3, r, shuffle=False, drop_last=True)) for r in range(3)] == \
        [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    s = DistributedSampler(ds, 2, 0, seed=5)
    a = list(s)
    s.set_epoch(1)
    b = list(s)
    assert len(a) == len(s) == 5 and a != b and a == list(DistributedSampler(ds, 2, 0, seed=5))
    both = a + list(DistributedSampler(ds, 2, 1, seed=5))
    assert sorted(both) == ds
    with pytest.raises(RuntimeError, match="^Requires distributed package to be available$"):
        DistributedSampler(ds)
    with pytest.raises(ValueError, match=r"^Invalid rank 3, rank should be in the interval \[0, 2\]$"):
        DistributedSampler(ds, 3, 3)
    try:
        import torch.utils.data.distributed as tud
    except ImportError:
        return
    for kw in (dict(shuffle=False), dict(shuffle=False, drop_last=True)):
        for n, reps in ((10, 3), (7, 4), (12, 5)):
            for r in range(reps):
                assert list(DistributedSampler(range(n), reps, r, **kw)) == \
                    list(tud.DistributedSampler(range(n), reps, r, **kw))
