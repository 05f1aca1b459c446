"""Random numbers: tg.Generator and generator=, tg.manual_seed, the random creators
(rand randn randint randperm multinomial normal poisson bernoulli *_like) and the
in-place methods (normal_ uniform_ exponential_ bernoulli_ random_ cauchy_
log_normal_ geometric_).

tapegrad's numbers are not PyTorch's (NumPy's PCG64 generator): the tests check
determinism under seeds and generators, shapes and dtypes and errors as PyTorch's,
and the distributions statistically, on a fixed seed, within 5 standard errors."""
import math

import numpy as np
import pytest

import tapegrad as tg

N = 200_000


def _within(sample_mean, mean, sd, n):
    """``sample_mean`` within 5 standard errors of ``mean``."""
    assert abs(sample_mean - mean) < 5 * sd / math.sqrt(n), (sample_mean, mean, sd, n)


# every random function, called with generator=g
DRAWS = {
    "rand": lambda m, g: m.rand(3, 4, generator=g),
    "randn": lambda m, g: m.randn(3, 4, generator=g),
    "randint": lambda m, g: m.randint(2, 9, (5,), generator=g),
    "randperm": lambda m, g: m.randperm(10, generator=g),
    "rand_like": lambda m, g: m.rand_like(m.zeros(2, 3), generator=g),
    "randn_like": lambda m, g: m.randn_like(m.zeros(2, 3), generator=g),
    "randint_like": lambda m, g: m.randint_like(m.zeros(2, 3), 1, 7, generator=g),
    "multinomial": lambda m, g: m.multinomial(m.tensor([0.2, 0.3, 0.5]), 2, generator=g),
    "multinomial_r": lambda m, g: m.multinomial(m.tensor([[0.2, 0.8], [0.5, 0.5]]), 4, True, generator=g),
    "normal_ff": lambda m, g: m.normal(1.0, 2.0, (4,), generator=g),
    "normal_tt": lambda m, g: m.normal(m.zeros(3), m.ones(3), generator=g),
    "normal_tf": lambda m, g: m.normal(m.zeros(2, 1), 2.0, generator=g),
    "normal_ft": lambda m, g: m.normal(2.0, m.ones(3), generator=g),
    "poisson": lambda m, g: m.poisson(m.full((4,), 3.0), g),
    "bernoulli": lambda m, g: m.bernoulli(m.full((4,), 0.3), generator=g),
    "bernoulli_p": lambda m, g: m.bernoulli(m.zeros(4), 0.3, generator=g),
    "Tensor.bernoulli": lambda m, g: m.full((4,), 0.5).bernoulli(generator=g),
    "Tensor.multinomial": lambda m, g: m.tensor([1.0, 2.0]).multinomial(3, True, generator=g),
    "normal_": lambda m, g: m.zeros(5).normal_(2.0, 3.0, generator=g),
    "uniform_": lambda m, g: m.zeros(5).uniform_(-1.0, 2.0, generator=g),
    "exponential_": lambda m, g: m.zeros(5).exponential_(2.0, generator=g),
    "bernoulli_": lambda m, g: m.zeros(5).bernoulli_(0.25, generator=g),
    "bernoulli_t": lambda m, g: m.zeros(3).bernoulli_(m.tensor([0.1, 0.5, 0.9]), generator=g),
    "random_": lambda m, g: m.zeros(5).random_(generator=g),
    "random_to": lambda m, g: m.zeros(5, dtype=m.int64).random_(7, generator=g),
    "random_from_to": lambda m, g: m.zeros(5).random_(-3, 4, generator=g),
    "cauchy_": lambda m, g: m.zeros(5).cauchy_(generator=g),
    "log_normal_": lambda m, g: m.zeros(5).log_normal_(generator=g),
    "geometric_": lambda m, g: m.zeros(5).geometric_(0.3, generator=g),
}


def _values(t):
    return t.numpy().copy()


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_a_seeded_generator_repeats(name):
    a = _values(DRAWS[name](tg, tg.Generator().manual_seed(123)))
    b = _values(DRAWS[name](tg, tg.Generator().manual_seed(123)))
    np.testing.assert_array_equal(a, b)
    # and the default generator is not consumed by a draw from another one
    tg.manual_seed(7)
    first = tg.rand(3).tolist()
    tg.manual_seed(7)
    DRAWS[name](tg, tg.Generator().manual_seed(1))
    assert tg.rand(3).tolist() == first


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_the_default_generator_repeats_under_manual_seed(name):
    tg.manual_seed(2024)
    a = _values(DRAWS[name](tg, None))
    tg.manual_seed(2024)
    b = _values(DRAWS[name](tg, None))
    np.testing.assert_array_equal(a, b)
    g = tg.Generator().manual_seed(2024)
    c = _values(DRAWS[name](tg, g))
    np.testing.assert_array_equal(a, c)     # (the default generator is a tg.Generator like any other)


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_shapes_and_dtypes_as_pytorch(name):
    torch = pytest.importorskip("torch")
    t = DRAWS[name](torch, torch.Generator().manual_seed(0))
    m = DRAWS[name](tg, tg.Generator().manual_seed(0))
    assert list(m.shape) == list(t.shape)
    td = str(t.dtype).split(".")[-1]
    assert str(m.dtype) == ("float64" if td == "float32" else td)     # (tapegrad's default float is float64)


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_generator_must_be_a_generator(name):
    with pytest.raises(TypeError, match="argument 'generator' must be torch.Generator, not int"):
        DRAWS[name](tg, 3)


def test_generator_methods():
    g = tg.Generator()
    assert g.device == tg.device("cpu")
    assert g.manual_seed(5) is g and g.initial_seed() == 5
    assert tg.Generator().manual_seed(-1).initial_seed() == 2 ** 64 - 1       # (as PyTorch: wraps to 64 bits)
    assert tg.manual_seed(2.7).initial_seed() == 2
    s = g.seed()
    assert isinstance(s, int) and 0 <= s < 2 ** 64 and g.initial_seed() == s
    state = g.get_state()
    assert state.dtype == np.uint8 and state.ndim == 1
    a = tg.randn(6, generator=g).tolist()
    g.set_state(state)
    assert tg.randn(6, generator=g).tolist() == a
    assert g.initial_seed() == s
    # a state carries over to another generator
    h = tg.Generator().set_state(state)
    assert tg.randn(6, generator=h).tolist() == a
    with pytest.raises(TypeError, match="RNG state must be a torch.ByteTensor"):
        g.set_state(tg.zeros(3))
    with pytest.raises(RuntimeError, match="Expected a CPUGeneratorImplState of size"):
        g.set_state(tg.zeros(3, dtype=tg.uint8))
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        g.manual_seed(2 ** 64)
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        tg.Generator("cuda")


def test_generator_errors_as_pytorch():
    torch = pytest.importorskip("torch")
    for call in (lambda m: m.Generator().set_state(m.zeros(3)), lambda m: m.Generator().manual_seed(2 ** 64),
                 lambda m: m.Generator().manual_seed(-2 ** 63 - 1), lambda m: m.Generator("gpu")):
        with pytest.raises(Exception) as te:
            call(torch)
        with pytest.raises(Exception) as me:
            call(tg)
        assert type(me.value) is type(te.value) and str(me.value) == str(te.value)
    for seed in (0, 5, -1, 2 ** 63):
        assert tg.Generator().manual_seed(seed).initial_seed() == torch.Generator().manual_seed(seed).initial_seed()
    for seed in (0, 5, -1, 2 ** 63, 2.5, "7"):
        assert tg.manual_seed(seed).initial_seed() == torch.manual_seed(seed).initial_seed()
    for seed in (2.5, "7"):
        with pytest.raises(RuntimeError) as te:
            torch.Generator().manual_seed(seed)
        with pytest.raises(RuntimeError) as me:
            tg.Generator().manual_seed(seed)
        assert str(me.value) == str(te.value)


def test_module_level_seeding():
    g = tg.manual_seed(11)
    assert g is tg.default_generator and tg.initial_seed() == 11
    a = tg.randn(4).tolist()
    tg.manual_seed(11)
    assert tg.randn(4).tolist() == a
    st = tg.get_rng_state()
    b = tg.rand(4).tolist()
    tg.set_rng_state(st)
    assert tg.rand(4).tolist() == b
    s = tg.seed()
    assert tg.initial_seed() == s
    # nn's initializers and dropout draw from the default generator too
    tg.manual_seed(3)
    w1 = tg.nn.Linear(4, 2).weight.tolist()
    tg.manual_seed(3)
    assert tg.nn.Linear(4, 2).weight.tolist() == w1


# -- the distributions -----------------------------------------------------------------------
def test_rand_and_randn_statistics():
    g = tg.Generator().manual_seed(0)
    u = tg.rand(N, generator=g).numpy()
    assert u.min() >= 0.0 and u.max() < 1.0
    _within(u.mean(), 0.5, math.sqrt(1 / 12), N)
    z = tg.randn(N, generator=g).numpy()
    _within(z.mean(), 0.0, 1.0, N)
    _within((z ** 2).mean(), 1.0, math.sqrt(2.0), N)
    z32 = tg.randn(N, generator=g, dtype=tg.float32)
    assert z32.dtype == np.float32
    _within(float(z32.numpy().mean()), 0.0, 1.0, N)
    u32 = tg.rand_like(tg.zeros(N, dtype=tg.float32), generator=g)
    assert u32.dtype == np.float32 and u32.numpy().max() < 1.0
    _within(float(u32.numpy().mean()), 0.5, math.sqrt(1 / 12), N)


def test_randint_statistics():
    g = tg.Generator().manual_seed(1)
    r = tg.randint(-2, 3, (N,), generator=g).numpy()
    assert r.dtype == np.int64 and set(np.unique(r)) == {-2, -1, 0, 1, 2}
    for v in range(-2, 3):
        _within((r == v).mean(), 0.2, math.sqrt(0.2 * 0.8), N)
    r = tg.randint_like(tg.zeros(N, dtype=tg.int16), 4, generator=g).numpy()
    assert r.dtype == np.int16 and set(np.unique(r)) == {0, 1, 2, 3}


def test_randperm_is_a_permutation():
    g = tg.Generator().manual_seed(2)
    for n in (0, 1, 7, 1000):
        p = tg.randperm(n, generator=g)
        assert p.dtype == np.int64 and sorted(p.tolist()) == list(range(n))
    # uniform: where 0 lands
    pos = np.array([tg.randperm(4, generator=g).tolist().index(0) for _ in range(4000)])
    for k in range(4):
        _within((pos == k).mean(), 0.25, math.sqrt(0.25 * 0.75), 4000)


def test_multinomial_statistics():
    g = tg.Generator().manual_seed(3)
    p = np.array([0.1, 0.0, 0.6, 0.3])
    s = tg.multinomial(tg.tensor(p * 5), N, True, generator=g).numpy()      # (weights need not sum to 1)
    assert s.dtype == np.int64 and s.shape == (N,) and 1 not in s
    for k in (0, 2, 3):
        _within((s == k).mean(), p[k], math.sqrt(p[k] * (1 - p[k])), N)
    # without replacement: distinct categories; the first draw has the probabilities p
    rows = tg.multinomial(tg.tensor(np.tile(p, (20000, 1))), 3, generator=g).numpy()
    assert rows.shape == (20000, 3)
    assert all(len(set(r)) == 3 for r in rows[:500])
    assert 1 not in rows
    for k in (0, 2, 3):
        _within((rows[:, 0] == k).mean(), p[k], math.sqrt(p[k] * (1 - p[k])), 20000)
    # all of them: a permutation of the nonzero categories, then the zero ones
    full = tg.multinomial(tg.tensor(p), 4, generator=g).tolist()
    assert sorted(full[:3]) == [0, 2, 3] and full[3] == 1


def test_normal_forms_statistics():
    g = tg.Generator().manual_seed(4)
    x = tg.normal(3.0, 2.0, (N,), generator=g).numpy()
    _within(x.mean(), 3.0, 2.0, N)
    _within(((x - 3.0) ** 2).mean(), 4.0, 4.0 * math.sqrt(2.0), N)
    m = tg.full((N,), -1.0)
    s = tg.full((N,), 0.5)
    for y in (tg.normal(m, s, generator=g), tg.normal(m, 0.5, generator=g)):
        _within(y.numpy().mean(), -1.0, 0.5, N)
    y = tg.normal(1.0, s, generator=g).numpy()
    _within(y.mean(), 1.0, 0.5, N)
    assert tg.normal(tg.zeros(2, 1), tg.ones(3)).shape == (2, 3)
    assert tg.normal(tg.zeros(3, dtype=tg.float32), 1.0).dtype == np.float32
    assert tg.normal(0.0, 1.0, (2,), dtype=tg.float32).dtype == np.float32


def test_poisson_bernoulli_statistics():
    g = tg.Generator().manual_seed(5)
    k = tg.poisson(tg.full((N,), 3.5), generator=g).numpy()
    assert k.dtype == np.float64 and (k == np.round(k)).all() and k.min() >= 0
    _within(k.mean(), 3.5, math.sqrt(3.5), N)
    assert tg.poisson(tg.zeros(5)).tolist() == [0.0] * 5
    b = tg.bernoulli(tg.full((N,), 0.3), generator=g).numpy()
    assert set(np.unique(b)) == {0.0, 1.0}
    _within(b.mean(), 0.3, math.sqrt(0.21), N)
    assert tg.bernoulli(tg.tensor([0.0, 1.0, 0.0, 1.0])).tolist() == [0.0, 1.0, 0.0, 1.0]
    b = tg.bernoulli(tg.zeros(N), 0.8, generator=g).numpy()
    _within(b.mean(), 0.8, math.sqrt(0.16), N)


def test_inplace_random_statistics():
    g = tg.Generator().manual_seed(6)
    x = tg.zeros(N)
    assert x.normal_(1.0, 3.0, generator=g) is x
    _within(x.numpy().mean(), 1.0, 3.0, N)
    _within(((x.numpy() - 1) ** 2).mean(), 9.0, 9.0 * math.sqrt(2.0), N)
    x.uniform_(-2.0, 6.0, generator=g)
    v = x.numpy()
    assert v.min() >= -2.0 and v.max() < 6.0
    _within(v.mean(), 2.0, 8 / math.sqrt(12), N)
    x.uniform_(**{"from": 10.0, "to": 11.0})
    assert x.numpy().min() >= 10.0 and x.numpy().max() < 11.0
    x.exponential_(4.0, generator=g)
    assert x.numpy().min() >= 0
    _within(x.numpy().mean(), 0.25, 0.25, N)
    x.bernoulli_(0.7, generator=g)
    _within(x.numpy().mean(), 0.7, math.sqrt(0.21), N)
    x.geometric_(0.25, generator=g)
    assert x.numpy().min() >= 1 and (x.numpy() == np.round(x.numpy())).all()
    _within(x.numpy().mean(), 4.0, math.sqrt(0.75) / 0.25, N)
    x.log_normal_(0.5, 0.25, generator=g)
    _within(np.log(x.numpy()).mean(), 0.5, 0.25, N)
    x.cauchy_(2.0, 1.0, generator=g)
    _within((x.numpy() < 2.0).mean(), 0.5, 0.5, N)
    x.random_(-3, 4, generator=g)
    assert set(np.unique(x.numpy())) == set(range(-3, 4))
    x.random_(5, generator=g)
    assert set(np.unique(x.numpy())) == set(range(5))
    i8 = tg.zeros(1000, dtype=tg.int8).random_(generator=g).numpy()
    assert i8.min() >= 0 and i8.max() <= 127 and i8.max() > 100
    bo = tg.zeros(100, dtype=tg.bool).random_(generator=g).numpy()
    assert set(np.unique(bo)) == {False, True}
    f32 = tg.zeros(1000, dtype=tg.float32).random_(generator=g).numpy()
    assert f32.min() >= 0 and f32.max() <= 2 ** 24 and (f32 == np.round(f32)).all() and f32.max() > 2 ** 23
    f64 = tg.zeros(1000).random_(generator=g).numpy()
    assert f64.max() <= 2 ** 53 and f64.max() > 2 ** 52
    t = tg.zeros(N).bernoulli_(tg.full((N,), 0.2), generator=g).numpy()
    _within(t.mean(), 0.2, 0.4, N)
    z = tg.ones(4)
    assert z.zero_() is z and z.tolist() == [0.0] * 4
    assert z.fill_(2.5) is z and z.tolist() == [2.5] * 4


def test_inplace_random_and_autograd():
    x = tg.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        x.normal_()
    with tg.no_grad():
        x.uniform_()        # (as nn.init does)
    assert x.requires_grad and x.detach().numpy().max() < 1.0
    y = x * 2
    y.normal_()             # the values are overwritten: no gradient flows to x through them
    (y * 3).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_inplace_random_as_pytorch_on_autograd():
    torch = pytest.importorskip("torch")
    for m in (torch, tg):
        x = m.zeros(3, requires_grad=True)
        y = x * 2
        y.exponential_()
        (y * 3).sum().backward()
        assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_the_drawing_functions_have_a_zero_gradient_as_pytorch():
    torch = pytest.importorskip("torch")
    for name, call in [("normal", lambda m, a, b: m.normal(a, b)), ("normal_f", lambda m, a, b: m.normal(a, 1.0)),
                       ("poisson", lambda m, a, b: m.poisson(b)), ("bernoulli", lambda m, a, b: m.bernoulli(b * 0.5))]:
        got = []
        for m in (torch, tg):
            a = m.zeros(3, requires_grad=True)
            b = m.ones(3, requires_grad=True)
            out = call(m, a, b)
            assert out.requires_grad
            (out * 2).sum().backward()
            got.append([None if v.grad is None else v.grad.tolist() for v in (a, b)])
        assert got[0] == got[1], name
    with tg.no_grad():
        assert not tg.normal(tg.zeros(2, requires_grad=True), 1.0).requires_grad
    assert not tg.normal(tg.zeros(2), 1.0).requires_grad


# -- errors, as PyTorch's -------------------------------------------------------------------------
ERRORS = [
    lambda m: m.randn(3, dtype=m.int64),
    lambda m: m.rand(3, dtype=m.int64),
    lambda m: m.rand_like(m.ones(3, dtype=m.int64)),
    lambda m: m.randn_like(m.ones(3, dtype=m.int64)),
    lambda m: m.randint_like(m.ones(3), 10, 5),
    lambda m: m.randint(5, 5, (2,)),
    lambda m: m.randperm(-1),
    lambda m: m.randperm(300, dtype=m.int8),
    lambda m: m.randperm(5, dtype=m.bool),
    lambda m: m.multinomial(m.tensor([0.2, 0.3, 0.5]), 5),
    lambda m: m.multinomial(m.tensor([-1.0, 0.0, 1.0]), 2),
    lambda m: m.multinomial(m.tensor([0.0, 0.0, 0.0]), 2, True),
    lambda m: m.multinomial(m.ones(2, 2, 2), 2, True),
    lambda m: m.multinomial(m.ones(()), 2, True),
    lambda m: m.multinomial(m.tensor([0.2, 0.8]), 0),
    lambda m: m.multinomial(m.ones(3, dtype=m.int64), 2),
    lambda m: m.multinomial(m.ones(0), 2),
    lambda m: m.normal(m.zeros(3), -m.ones(3)),
    lambda m: m.normal(0.0, -1.0, (3,)),
    lambda m: m.normal(m.zeros(3), -2.0),
    lambda m: m.normal(m.zeros(2, 1, dtype=m.int64), 2.0),
    lambda m: m.normal(m.zeros(3), m.ones(4)),
    lambda m: m.bernoulli(m.full((3,), 1.5)),
    lambda m: m.bernoulli(m.full((3,), 1, dtype=m.int64)),
    lambda m: m.bernoulli(m.full((3,), 0.5), 1.3),
    lambda m: m.poisson(-m.ones(3)),
    lambda m: m.poisson(m.ones(3, dtype=m.int64)),
    lambda m: m.zeros(3).normal_(0, -1),
    lambda m: m.zeros(3).uniform_(2, 1),
    lambda m: m.zeros(3).exponential_(-1),
    lambda m: m.zeros(3).exponential_(0),
    lambda m: m.zeros(3).bernoulli_(2),
    lambda m: m.zeros(3, dtype=m.int64).normal_(),
    lambda m: m.zeros(3, dtype=m.int64).uniform_(),
    lambda m: m.zeros(3, dtype=m.int64).exponential_(),
    lambda m: m.zeros(3).geometric_(1.3),
    lambda m: m.zeros(3).geometric_(0),
    lambda m: m.zeros(3).log_normal_(1, -1),
    lambda m: m.zeros(3).random_(5, 2),
    lambda m: m.zeros(3, requires_grad=True).normal_(),
]


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_errors_as_pytorch(i):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as te:
        ERRORS[i](torch)
    with pytest.raises(Exception) as me:
        ERRORS[i](tg)
    assert type(me.value) is type(te.value)
    assert str(me.value) == str(te.value)


def test_random_functions_are_not_replayed():
    for body in (lambda x: x * tg.randn(3), lambda x: x * tg.normal(x, 1.0), lambda x: x + tg.rand_like(x),
                 lambda x: x * tg.zeros(3).uniform_(), lambda x: x * tg.bernoulli(tg.full((3,), 0.5))):
        with pytest.raises(tg.NotReplayable, match="random"):
            tg.record(lambda x: body(x).sum(), np.array([1.0, 2.0, 3.0]))


def test_messages_print_numbers_as_pytorch():
    torch = pytest.importorskip("torch")
    for call in (lambda m: m.zeros(2).normal_(0, -float("inf")), lambda m: m.zeros(2).exponential_(-2.5),
                 lambda m: m.zeros(2).uniform_(1.5, -0.25), lambda m: m.zeros(2).bernoulli_(1.25)):
        with pytest.raises(RuntimeError) as te:
            call(torch)
        with pytest.raises(RuntimeError) as me:
            call(tg)
        assert str(me.value) == str(te.value)
