"""tg.compile and the values a function reads from outside its arguments (replay/captured.py).

The adversarial table: each pattern is a function reading a captured value (a global, a
closure cell, an attribute, a default, an array, a container element, a method, ...),
called through tg.compile several times with the value changed between the calls.  Every
call is compared with eager execution of the same function (value and gradient).  A
pattern either replays correctly (its guard records again when the value changes, and
replays when a recorded value comes back), runs eagerly (the function changes what it
reads: a replay would not), or is unguarded: those are listed in docs/replay.md ("What a
replay assumes"), and their tests pin the stale result a replay gives.
"""
import functools
import math
import os
import sys
import types
import warnings

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn

sys.path.insert(0, os.path.dirname(__file__))
import helper_captured_module as other_module  # noqa: E402

X0 = np.array([0.5, -1.25, 2.0])


def _run(f, x=X0):
    """(value, gradient) of ``f`` at ``x`` (a fresh leaf each call)."""
    t = tg.tensor(x, requires_grad=True)
    y = f(t)
    y.sum().backward()
    return y.detach().numpy().copy(), t.grad.numpy().copy()


# -- the patterns ----------------------------------------------------------------------
# Each factory returns (function, set(value), values): the calls set each value in turn,
# then call the compiled function and the function itself.
G_FLOAT = 2.0
G_INT = 3
G_FLAG = True
G_MODE = "square"
G_OPT = None
G_TUPLE = (1.0, 2.0)
G_ARRAY = np.array([1.0, 2.0, 3.0])
G_NP_SCALAR = np.float64(1.5)
G_DICT = {"lr": 0.5, "n": 2}
G_LIST = [1.0, 2.0]
G_FUNCS = [lambda t: t * 2.0, lambda t: t + 1.0]
G_ACT = tg.sin
G_TENSOR = tg.tensor([1.0, 2.0, 3.0])
G_TENSORS = {"w": tg.tensor([1.0, 1.0, 1.0])}


def _global(name):
    return lambda v: globals().__setitem__(name, v)


def p_global_float():
    return (lambda x: x * G_FLOAT), _global("G_FLOAT"), [2.0, 3.0, 3.0, 2.0, -0.5]


def p_global_negative_zero():
    # (0.0 and -0.0 give zeros of other signs: a float guard tells them apart)
    return (lambda x: tg.tensor(1.0) / (x * 0.0 + G_FLOAT)), _global("G_FLOAT"), [0.0, -0.0, 0.0, 1.0]


def p_global_loop_bound():
    def f(x):
        for _ in range(G_INT):
            x = x * 1.5
        return x
    return f, _global("G_INT"), [3, 5, 5, 3, 0]


def p_global_flag_branch():
    def f(x):
        return x.sin() if G_FLAG else x.cos()
    return f, _global("G_FLAG"), [True, False, False, True]


def p_global_string_mode():
    def f(x):
        if G_MODE == "square":
            return x * x
        return x.exp()
    return f, _global("G_MODE"), ["square", "exp", "exp", "square"]


def p_global_none_or_number():
    def f(x):
        return x.sin() if G_OPT is None else x * G_OPT
    return f, _global("G_OPT"), [None, 2.0, 2.0, None, 3.0]


def p_global_tuple():
    return (lambda x: x * G_TUPLE[0] + G_TUPLE[1]), _global("G_TUPLE"), [(1.0, 2.0), (3.0, 2.0), (1.0, 2.0)]


def p_global_numpy_scalar():
    return (lambda x: x * G_NP_SCALAR), _global("G_NP_SCALAR"), [np.float64(1.5), np.float64(2.5)]


def p_closure_float():
    s = [2.0]

    def make():
        scale = s[0]
        return lambda x: x * scale
    # (a closure cell set from outside: the function's own cell)
    f = make()

    def set_(v):
        f.__closure__[0].cell_contents = v
    return f, set_, [2.0, 4.0, 4.0, 2.0]


def p_nonlocal_setter():
    def make():
        k = 1

        def f(x):
            for _ in range(k):
                x = x.sin()
            return x

        def set_k(v):
            nonlocal k
            k = v
        return f, set_k
    f, set_k = make()
    return f, set_k, [1, 3, 3, 2, 1]


def p_closure_of_closure():
    def outer():
        a = [1.0]

        def middle():
            def inner(x):
                return x * a[0]
            return inner
        return middle(), a
    f, a = outer()

    def set_(v):
        a[0] = v
    return f, set_, [1.0, 2.5, 2.5, 1.0]


def p_attribute():
    m = types.SimpleNamespace(k=2.0)

    def set_(v):
        m.k = v
    return (lambda x: x * m.k), set_, [2.0, 5.0, 5.0, 2.0]


def p_nested_attribute():
    cfg = types.SimpleNamespace(opt=types.SimpleNamespace(lr=0.1))

    def set_(v):
        cfg.opt.lr = v
    return (lambda x: x - cfg.opt.lr * x * x), set_, [0.1, 0.2, 0.2, 0.1]


def p_nested_object_replaced():
    cfg = types.SimpleNamespace(opt=types.SimpleNamespace(lr=0.1))

    def set_(v):
        cfg.opt = types.SimpleNamespace(lr=v)
    return (lambda x: x - cfg.opt.lr * x * x), set_, [0.1, 0.3, 0.3]


class Config:
    scale = 2.0


def p_class_attribute():
    def set_(v):
        Config.scale = v
    return (lambda x: x * Config.scale), set_, [2.0, 3.0, 3.0, 2.0]


def p_class_attribute_through_instance():
    c = Config()

    def set_(v):
        Config.scale = v
    return (lambda x: x * c.scale), set_, [2.0, 4.0, 4.0, 2.0]


class Made:
    factor = 1.0

    def __init__(self):
        self.offset = G_FLOAT


def p_object_made_in_the_call():
    # an instance made inside: its class attribute and the global its __init__ reads
    def f(x):
        m = Made()
        return x * m.factor + m.offset

    def set_(v):
        globals()["G_FLOAT"] = v
        Made.factor = v / 2
    return f, set_, [2.0, 3.0, 3.0, 2.0]


def p_instance_attribute_shadowing_class():
    c = Config()

    def set_(v):
        if v is None:
            c.__dict__.pop("scale", None)
        else:
            c.scale = v
    Config.scale = 2.0
    return (lambda x: x * c.scale), set_, [None, 5.0, 5.0, None]


def p_default_argument():
    def f(x, s=2.0):
        return x * s

    def set_(v):
        f.__defaults__ = (v,)
    return f, set_, [2.0, 7.0, 7.0, 2.0]


def p_keyword_only_default():
    def f(x, *, p=2):
        return x ** p

    def set_(v):
        f.__kwdefaults__ = {"p": v}
    return f, set_, [2, 3, 3, 2]


def p_default_object_attribute():
    box = types.SimpleNamespace(k=1.0)

    def f(x, b=box):
        return x * b.k

    def set_(v):
        box.k = v
    return f, set_, [1.0, 2.0, 2.0]


def p_array_changed_in_place_tensor():
    A = np.array([1.0, 2.0, 3.0])

    def set_(v):
        A[0] = v
    return (lambda x: x * tg.tensor(A)), set_, [1.0, 100.0, 100.0, 1.0]


def p_global_array_changed_in_place():
    def set_(v):
        G_ARRAY[1] = v
    return (lambda x: (x * tg.tensor(G_ARRAY)).exp()), set_, [2.0, -1.0, -1.0, 2.0]


def p_global_array_rebound():
    return (lambda x: x * tg.tensor(G_ARRAY)), _global("G_ARRAY"), [
        np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0]), np.array([3.0, 2.0, 1.0])]


def p_array_as_operand():
    A = np.array([1.0, 2.0, 3.0])

    def set_(v):
        A[2] = v
    return (lambda x: x * A), set_, [3.0, -3.0, -3.0]


def p_array_element_as_number():
    A = np.array([1.0, 2.0, 3.0])

    def set_(v):
        A[0] = v
    return (lambda x: x * float(A[0])), set_, [1.0, 4.0, 4.0, 1.0]


def p_dict_element():
    def set_(v):
        G_DICT["lr"] = v
    return (lambda x: x * G_DICT["lr"]), set_, [0.5, 0.25, 0.25, 0.5]


def p_dict_loop_bound():
    def f(x):
        for _ in range(G_DICT["n"]):
            x = x.tanh()
        return x

    def set_(v):
        G_DICT["n"] = v
    return f, set_, [2, 4, 4, 2]


def p_dict_variable_key():
    key = ["lr"]

    def f(x):
        return x * G_DICT[key[0]]

    def set_(v):
        key[0] = v
    G_DICT["other"] = 7.0
    return f, set_, ["lr", "other", "other", "lr"]


def p_list_element():
    def set_(v):
        G_LIST[1] = v
    return (lambda x: x * G_LIST[1]), set_, [2.0, 5.0, 5.0]


def p_list_iterated_and_appended():
    ws = [1.0]

    def f(x):
        for w in ws:
            x = x * w + 0.5
        return x

    def set_(v):
        ws[:] = [1.0] * v
    return f, set_, [1, 3, 3, 1]


def p_lambdas_in_a_list():
    def set_(v):
        G_FUNCS[0] = v
    return (lambda x: G_FUNCS[0](x) + G_FUNCS[1](x)), set_, [
        G_FUNCS[0], lambda t: t * t, lambda t: t.exp()]


def p_lambdas_iterated():
    fs = [lambda t: t * 2.0]

    def f(x):
        for g in fs:
            x = g(x)
        return x

    def set_(v):
        fs.append(v)
    return f, set_, [lambda t: t + 1.0, lambda t: t.sin()]


def p_lambda_reading_a_global():
    g = lambda t: t * G_FLOAT       # noqa: E731
    return (lambda x: g(x) + 1.0), _global("G_FLOAT"), [2.0, 3.0, 3.0]


def p_generator():
    weights = [1.0, 2.0]

    def gen():
        for w in weights:
            yield w

    def f(x):
        for w in gen():
            x = x * w
        return x

    def set_(v):
        weights.append(v)
    return f, set_, [3.0, 0.5]


def p_function_rebound():
    return (lambda x: G_ACT(x) * 2.0), _global("G_ACT"), [tg.sin, tg.cos, tg.cos, tg.sin]


def p_helper_reading_a_global():
    def helper(t):
        return t * G_FLOAT

    def f(x):
        return helper(x).sum() * x
    return f, _global("G_FLOAT"), [2.0, 1.0, 1.0]


def p_function_in_another_module():
    def set_(v):
        other_module.SCALE = v
    return (lambda x: other_module.scaled(x) + 1.0), set_, [2.0, 3.0, 3.0, 2.0]


def p_function_imported_from_another_module():
    scaled = other_module.scaled

    def set_(v):
        other_module.SCALE = v
    return (lambda x: scaled(x) * x), set_, [2.0, -1.0, -1.0]


def p_partial_keyword():
    def f(x, s):
        return x * s
    p = functools.partial(f, s=2.0)

    def set_(v):
        p.keywords["s"] = v
    return (lambda x: p(x)), set_, [2.0, 3.0, 3.0]


def p_method_of_a_module_level_object():
    class Scaler:
        def __init__(self):
            self.k = 2.0

        def apply(self, t):
            return t * self.k
    obj = Scaler()

    def set_(v):
        obj.k = v
    return (lambda x: obj.apply(x)), set_, [2.0, 4.0, 4.0, 2.0]


def p_callable_object():
    class Affine:
        def __init__(self):
            self.a = 1.0

        def __call__(self, t):
            return t * self.a + 1.0
    obj = Affine()

    def set_(v):
        obj.a = v
    return (lambda x: obj(x)), set_, [1.0, 2.0, 2.0]


def p_staticmethod_and_classmethod():
    class K:
        c = 2.0

        @classmethod
        def scale(cls, t):
            return t * cls.c

    def set_(v):
        K.c = v
    return (lambda x: K.scale(x)), set_, [2.0, 3.0, 3.0]


def p_property():
    class P:
        def __init__(self):
            self._k = 2.0

        @property
        def k(self):
            return self._k * 2
    obj = P()

    def set_(v):
        obj._k = v
    return (lambda x: x * obj.k), set_, [2.0, 1.0, 1.0]


def p_local_alias_of_an_attribute():
    m = types.SimpleNamespace(cfg=types.SimpleNamespace(lr=0.1))

    def f(x):
        c = m.cfg
        return x * c.lr

    def set_(v):
        m.cfg.lr = v
    return f, set_, [0.1, 0.2, 0.2]


def p_argument_object_attribute():
    # an object passed as an argument (in the signature by identity): its attributes
    cfg = types.SimpleNamespace(lr=0.5)

    def f(x, c):
        return x * c.lr

    def set_(v):
        cfg.lr = v
    return (lambda f_=f: (lambda x: f_(x, cfg)))(), set_, [0.5, 1.5, 1.5]


def p_tensor_global_rebound():
    return (lambda x: x * G_TENSOR), _global("G_TENSOR"), [G_TENSOR, tg.tensor([3.0, 2.0, 1.0])]


def p_tensor_in_a_dict_replaced():
    def set_(v):
        G_TENSORS["w"] = v
    return (lambda x: x * G_TENSORS["w"]), set_, [G_TENSORS["w"], tg.tensor([2.0, 2.0, 2.0])]


def p_math_constant_and_global():
    return (lambda x: x * math.pi + G_FLOAT), _global("G_FLOAT"), [2.0, 0.0, 0.0]


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 2.0
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) * self.k


def p_module_attribute():
    tg.manual_seed(0)
    m = Scale()

    def set_(v):
        m.k = v
    return m, set_, [2.0, 3.0, 3.0, 2.0]


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        return y.relu() if self.training else y.tanh()


def p_module_training_flag():
    tg.manual_seed(0)
    m = Branchy()
    return m, (lambda v: m.train(v)), [True, False, False, True]


def p_module_parameter_replaced():
    tg.manual_seed(0)
    m = nn.Linear(3, 3)

    def set_(v):
        m.weight = nn.Parameter(tg.tensor(np.eye(3) * v))
    return m, set_, [1.0, 2.0, 2.0]


def p_module_submodule_replaced():
    tg.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.Tanh())

    def set_(v):
        setattr(m, "1", v)
    return m, set_, [nn.Tanh(), nn.Sigmoid(), nn.ReLU()]


def p_library_module_attribute():
    # a tapegrad layer's own (non-tensor) attribute, read by its forward
    m = nn.Softplus(beta=1.0)

    def set_(v):
        m.beta = v
    return m, set_, [1.0, 2.0, 2.0]


GUARDED = [v for k, v in sorted(globals().items()) if k.startswith("p_")]


@pytest.mark.parametrize("pattern", GUARDED, ids=[p.__name__[2:] for p in GUARDED])
def test_a_changed_value_records_again_and_a_recorded_one_replays(pattern):
    f, set_, values = pattern()
    cf = tg.compile(f)
    stats = getattr(cf, "_compiled", cf).stats      # (a module's: its OptimizedModule's Compiled)
    for v in values:
        set_(v)
        for _ in range(2):      # (the second call with the same value replays)
            got, want = _run(cf), _run(f)
            np.testing.assert_allclose(got[0], want[0], rtol=1e-13, atol=1e-15)
            np.testing.assert_allclose(got[1], want[1], rtol=1e-13, atol=1e-15)
    assert stats.replays >= len(values), stats
    if len(set(map(repr, values))) > 1:
        assert stats.divergences >= 1, stats


def test_the_table_has_at_least_forty_patterns():
    assert len(GUARDED) + len(SIDE_EFFECTS) + len(UNGUARDED) >= 40


# -- functions that change what they read: run eagerly, as a replay would not --------------
G_COUNTER = 0
G_HISTORY = []


def s_global_counter():
    def f(x):
        global G_COUNTER
        G_COUNTER += 1
        return x * G_COUNTER
    return f


def s_list_appended():
    def f(x):
        y = x * 2.0
        G_HISTORY.append(1)
        return y * len(G_HISTORY)
    return f


def s_attribute_set():
    box = types.SimpleNamespace(last=None, calls=0)

    def f(x):
        box.calls = box.calls + 1
        return x * box.calls
    return f


SIDE_EFFECTS = [s_global_counter, s_list_appended, s_attribute_set]


@pytest.mark.parametrize("pattern", SIDE_EFFECTS, ids=[p.__name__[2:] for p in SIDE_EFFECTS])
def test_a_function_that_changes_what_it_reads_runs_eagerly(pattern):
    f = pattern()
    cf = tg.compile(f)
    outs = [_run(cf)[0] for _ in range(4)]
    # each call saw the state the previous one left, as eager calls do
    assert [o[0] for o in outs] == [o[0] for o in outs] and len({float(o[0]) for o in outs}) == 4
    assert cf.stats.replays == 0
    assert "while it runs" in next(iter(cf.why.values()))


# -- what is not guarded (docs/replay.md, "What a replay assumes"): pinned ----------------
G_HIDDEN = 2.0


def test_unguarded_a_global_read_through_globals():
    f = tg.compile(lambda x: x * globals()["G_HIDDEN"])
    global G_HIDDEN
    G_HIDDEN = 2.0
    assert _run(f)[0].tolist() == (X0 * 2).tolist()
    G_HIDDEN = 3.0
    assert _run(f)[0].tolist() == (X0 * 2).tolist()     # the recorded 2.0: unguarded


def test_unguarded_getattr_with_a_computed_name():
    m = types.SimpleNamespace(k=2.0)
    name = "".join(["k"])
    f = tg.compile(lambda x: x * getattr(m, name))
    _run(f)
    m.k = 5.0
    assert _run(f)[0].tolist() == (X0 * 2).tolist()     # the recorded 2.0: unguarded


def test_unguarded_numpy_random_numbers():
    rng = np.random.default_rng(0)
    f = tg.compile(lambda x: x * float(rng.uniform()))
    first = _run(f)[0]
    assert _run(f)[0].tolist() == first.tolist()        # the number drawn at the recording, again


def test_unguarded_a_value_read_by_c_code():
    import operator
    m = types.SimpleNamespace(k=2.0)
    get = operator.attrgetter("k")
    f = tg.compile(lambda x: x * get(m))
    _run(f)
    m.k = 3.0
    assert _run(f)[0].tolist() == (X0 * 2).tolist()     # attrgetter is C code: m by identity only


def test_unguarded_the_clock_and_the_environment():
    os.environ["TAPEGRAD_TEST_SCALE"] = "2"
    f = tg.compile(lambda x: x * float(os.environ["TAPEGRAD_TEST_SCALE"]))
    _run(f)
    os.environ["TAPEGRAD_TEST_SCALE"] = "3"
    try:
        assert _run(f)[0].tolist() == (X0 * 2).tolist()
    finally:
        del os.environ["TAPEGRAD_TEST_SCALE"]


UNGUARDED = [test_unguarded_a_global_read_through_globals, test_unguarded_getattr_with_a_computed_name,
             test_unguarded_numpy_random_numbers, test_unguarded_a_value_read_by_c_code,
             test_unguarded_the_clock_and_the_environment]


# -- the issue's snippets, word for word ---------------------------------------------------
S = 2.0
N = 3


def test_the_snippets_of_the_issue():
    global S, N
    f = tg.compile(lambda x: x * S)
    f(tg.ones(1))
    S = 3.0
    assert f(tg.ones(1)).tolist() == [3.0]

    def loop(x):
        for _ in range(N):
            x = x * 2
        return x
    l = tg.compile(loop)        # noqa: E741
    l(tg.ones(1))
    N = 5
    assert l(tg.ones(1)).tolist() == [32.0]

    m = types.SimpleNamespace(k=2.0)
    g = tg.compile(lambda x: x * m.k)
    g(tg.ones(1))
    m.k = 5.0
    assert g(tg.ones(1)).tolist() == [5.0]

    A = np.array([1., 2.])
    h = tg.compile(lambda x: (x * tg.tensor(A)).sum())
    h(tg.ones(2))
    A[0] = 100.
    assert h(tg.ones(2)).item() == 102.0
    assert f.stats.divergences == 1 and "S" in next(iter(f.why.values()))


# -- why, strict, the bound on recordings ------------------------------------------------
def test_why_names_the_value_and_the_values():
    box = types.SimpleNamespace(lr=0.1)
    f = tg.compile(lambda x: x * box.lr if box.lr < 1 else x)     # (compared: not read live)
    f(tg.ones(2))
    box.lr = 0.2
    f(tg.ones(2))
    (why,) = f.why.values()
    assert why.startswith("box.lr (a closure variable of test_why_names_the_value_and_the_values.<locals>.<lambda>()) "
                          "changed (recorded 0.1, now 0.2)"), why
    assert f.stats.divergences == 1 and f.stats.recordings == 2


def test_strict_raises_naming_the_value():
    box = types.SimpleNamespace(k=1)
    f = tg.compile(lambda x: x * box.k, strict=True)
    f(tg.ones(2))
    box.k = 2
    with pytest.raises(tg.TapeDivergence, match=r"box\.k \(a closure variable of .*\) changed \(recorded 1, now 2\)"):
        f(tg.ones(2))


def test_recordings_are_bounded_with_one_warning_naming_the_value():
    box = types.SimpleNamespace(n=0)

    def f(x):
        for _ in range(box.n):      # (a loop bound: a new tape for each value)
            x = x * 1.5
        return x.log()
    cf = tg.compile(f)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for i in range(20):
            box.n = i               # a value that changes at every call
            got = cf(tg.ones(2)).tolist()
            assert got == pytest.approx([math.log(1.5 ** i)] * 2, rel=1e-15, abs=1e-15)
    limit = [w for w in seen if "recorded 8 times" in str(w.message)]
    assert len(limit) == 1 and "last box.n (a closure variable of" in str(limit[0].message)
    assert cf.stats.recordings == 9 and cf.stats.eager == 11
    box.n = 3                       # a recorded value again: replayed
    cf(tg.ones(2))
    assert cf.stats.replays == 1


def test_guard_check_costs_are_per_recording_not_per_value_read():
    # a function reading nothing from outside its arguments has no guard to run
    f = tg.compile(lambda x: (x * x).sum())
    f(tg.ones(3))
    f(tg.ones(3))
    (R,) = next(iter(f.cache.values()))
    assert R.captures is None


def test_captured_values_found_and_their_kinds():
    from tapegrad.replay.captured import discover
    m = types.SimpleNamespace(k=2.0, sub=types.SimpleNamespace(j=1))
    A = np.array([1.0, 2.0])

    def f(x, c=None):
        for _ in range(G_INT):
            x = x * G_FLOAT
        return x * m.k + m.sub.j * tg.tensor(A) * G_DICT["lr"] + np.sin(1.0) + math.pi
    caps = discover(f, (tg.ones(2),), {})
    kinds = {g.label: g.kind for g in caps.guards}
    where = "closure variable of test_captured_values_found_and_their_kinds.<locals>.f()"
    assert kinds == {"G_INT (a global of module test_replay_guards)": "eq",
                     "G_FLOAT (a global of module test_replay_guards)": "float",
                     "m.k (a %s)" % where: "float", "m.sub.j (a %s)" % where: "eq", "A (a %s)" % where: "array",
                     "G_DICT['lr'] (a global of module test_replay_guards)": "float"}, kinds


def test_check_every_nth_replay_against_eager():
    hidden = {"k": 2.0}
    f = tg.compile(lambda x: x * globals()["G_HIDDEN"] * hidden["k"], check=2)
    global G_HIDDEN
    G_HIDDEN = 2.0
    for _ in range(5):
        _run(f)
    assert f.stats.checks == 2      # (replays 2 and 4)
    G_HIDDEN = 5.0                  # unguarded (read through globals()): check=2 finds it
    _run(f)
    with pytest.raises(tg.TapeDivergence, match="differs from eager execution in output 0"):
        _run(f)
    with pytest.raises(ValueError, match="check must be a non-negative int"):
        tg.compile(lambda x: x, check=-1)


# -- numbers read live: a float read only as an operand of tensor arithmetic -------------------
G_LR = 0.1


def _step(w, g):
    """Every operator a number can be an operand of, with the learning rate a global."""
    return ((w - G_LR * g).sum() + (w * w).sum() * G_LR + (w / G_LR).sum() + (G_LR - w).sum()
            + (w ** G_LR).sum() + (w - G_LR).sum() + (G_LR / w).sum() + (G_LR ** w).sum() + (w + G_LR).sum())


def _both(f, ref, *arrays):
    got = _run(lambda t: f(t, *map(tg.tensor, arrays)), X0 * 0.5 + 1.0)
    want = _run(lambda t: ref(t, *map(tg.tensor, arrays)), X0 * 0.5 + 1.0)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_a_learning_rate_schedule_is_read_live_after_two_recordings():
    global G_LR
    f = tg.compile(_step)
    g = np.array([0.5, -0.5, 0.25])
    for i in range(12):
        G_LR = 0.1 / (1 + i)
        _both(f, _step, g)
    assert f.stats.recordings == 2 and f.stats.replays == 10 and f.stats.divergences == 1
    (why,) = f.why.values()
    assert why == "G_LR (a global of module test_replay_guards): read live from now on"
    (R,) = next(iter(f.cache.values()))
    assert len(R.live_params) == 9 and {sign for _, _, sign, _ in R.live_params} == {1.0, -1.0}


def test_numbers_read_live_in_attributes_cells_and_dicts_and_several_at_once():
    cfg = types.SimpleNamespace(lr=0.1)
    d = {"wd": 0.01}
    m = [2.0]
    scale = m[0]

    def step(w, g):
        return (w - cfg.lr * g - d["wd"] * w).sum() * scale

    def setcell(v):
        step.__closure__[[c for c in step.__code__.co_freevars].index("scale")].cell_contents = v
    f = tg.compile(step)
    g = np.array([1.0, 2.0, 3.0])
    for i in range(10):
        cfg.lr = 0.1 * (i + 1)
        if i >= 3:
            d["wd"] = 0.01 * i
        if i >= 6:
            setcell(2.0 + i)
        _both(f, step, g)
    assert f.stats.recordings == 4 and f.stats.replays == 6     # (each number live after it first changed)
    (R,) = next(iter(f.cache.values()))
    assert sorted(g.label.split(" ")[0] for g in R.captures.live) == ["cfg.lr", "d['wd']", "scale"]


def test_a_number_used_otherwise_is_guarded_by_value():
    box = types.SimpleNamespace(s=0.5)
    uses = {
        "compared": lambda x: x * box.s if box.s > 0 else -x,
        "python arithmetic": lambda x: x * (box.s * 2.0),
        "a C function": lambda x: x * math.exp(box.s),
        "an array": lambda x: x * tg.tensor(box.s),
        "printed": lambda x: x * float("%.17g" % box.s),
        "formatted too": lambda x: x * box.s + x * float("%.3f" % box.s),
        "a loop bound too": lambda x: x * box.s + sum(x for _ in range(int(box.s))),
    }
    for name, fn in uses.items():
        f = tg.compile(fn)
        for i in range(5):
            box.s = 0.5 + i
            np.testing.assert_array_equal(_run(f)[0], _run(fn)[0])
        assert f.stats.recordings == 5 and f.stats.replays == 0, name
        (R,) = next(iter(f.cache.values()))[:1]
        assert not R.live_params, name


def test_a_number_read_live_that_stops_being_a_float_records_again():
    global G_LR
    f = tg.compile(_step)
    g = np.array([0.5, -0.5, 0.25])
    for v in (0.1, 0.2, 0.3):
        G_LR = v
        _both(f, _step, g)
    G_LR = 1          # an int: the live number's guard asks for a float
    _both(f, _step, g)
    assert f.stats.recordings == 3
    G_LR = 0.1


def test_a_tape_reading_numbers_live_is_not_fused(monkeypatch):
    from tapegrad.replay import fuse
    monkeypatch.setattr(fuse, "AUTO_ELEMENTS", 0)
    monkeypatch.setattr(sys.modules["tapegrad.replay.forward"], "ARENA_TOTAL", 0)
    box = types.SimpleNamespace(lr=0.1)
    f = tg.compile(lambda x: (x - box.lr * x * x).sum(), fuse=True)
    for i in range(4):
        box.lr = 0.1 * (i + 1)
        _run(f)
    assert f.fusion()[0] == {"fused": False, "why": "it reads numbers live (the fused loops hold them as constants)"}


# -- tg.record: one recording, so a changed value raises; a tape file holds the values as constants
G_REC = 2.0


def test_a_recorded_tape_raises_when_a_value_it_read_changed(tmp_path):
    global G_REC
    G_REC = 2.0
    tape = tg.record(lambda x: (x * G_REC).sum(), np.ones(3))
    assert tape(np.ones(3)) == 6.0
    path = str(tmp_path / "t.tape")
    tape.save(path)
    G_REC = 3.0
    with pytest.raises(tg.TapeDivergence, match=r"G_REC \(a global of module test_replay_guards\) changed "
                                                r"\(recorded 2.0, now 3.0\)"):
        tape(np.ones(3))
    with pytest.raises(tg.TapeDivergence, match="G_REC"):
        tape.value_and_grad(np.ones(3))
    # a tape file holds no Python value: the number it read is a constant of the loaded tape
    loaded = tg.load_tape(path)
    assert loaded(np.ones(3)) == 6.0
    assert loaded.value_and_grad(np.ones(3))[1].tolist() == [2.0, 2.0, 2.0]
    G_REC = 2.0
    assert tape(np.ones(3)) == 6.0


def test_tg_record_refuses_a_function_that_changes_what_it_reads():
    box = types.SimpleNamespace(calls=0)

    def f(x):
        box.calls += 1
        return (x * box.calls).sum()
    with pytest.raises(tg.NotReplayable, match=r"it changes box.calls \(a closure variable of .*\) while it runs"):
        tg.record(f, np.ones(3))
