"""What an entry keeps for the reverse pass depends on which of its inputs need a
gradient, as in PyTorch: ``a * b`` keeps ``b`` only when ``a`` requires grad and ``a``
only when ``b`` does, ``x @ W`` with only ``W`` requiring grad keeps ``x``.  Only what
is kept is version-checked at backward, so an optimizer step between two backward
passes of one forward through a first layer works (actor-critic, multi-loss)."""
import gc
import re

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import gradcheck, gradgradcheck

F = tg.nn.functional

# -- the in-place table -----------------------------------------------------------
# op -> (forward, shape of a, shape of b); each run changes one input in place
# between forward and backward
OPS = {
    "add": (lambda m, a, b: a + b, (3,), (3,)),
    "sub": (lambda m, a, b: a - b, (3,), (3,)),
    "mul": (lambda m, a, b: a * b, (3,), (3,)),
    "div": (lambda m, a, b: a / b, (3,), (3,)),
    "pow": (lambda m, a, b: a ** b, (3,), (3,)),
    "maximum": (lambda m, a, b: m.maximum(a, b), (3,), (3,)),
    "minimum": (lambda m, a, b: m.minimum(a, b), (3,), (3,)),
    "where": (lambda m, a, b: m.where(m.tensor([True, False, True]), a, b), (3,), (3,)),
    "mul_broadcast": (lambda m, a, b: a * b, (2, 3), (3,)),
    "mul_0d": (lambda m, a, b: a * b, (3,), ()),
    "mul_one_element": (lambda m, a, b: a * b, (1,), (1,)),
    "dot": (lambda m, a, b: m.dot(a, b), (3,), (3,)),
    "mv": (lambda m, a, b: m.mv(a, b), (2, 3), (3,)),
    "mm": (lambda m, a, b: m.mm(a, b), (2, 3), (3, 4)),
    "bmm": (lambda m, a, b: m.bmm(a, b), (2, 2, 3), (2, 3, 4)),
    "matmul_vector_matrix": (lambda m, a, b: m.matmul(a, b), (3,), (3, 4)),
    "matmul_broadcast": (lambda m, a, b: m.matmul(a, b), (2, 2, 3), (3, 4)),
    "linear": (lambda m, a, b: m.nn.functional.linear(a, b), (2, 3), (4, 3)),
}
RG = {"a": (True, False), "b": (False, True), "ab": (True, True)}

# Which in-place change makes backward raise, per op and per inputs requiring grad:
# the set of inputs whose change raises (found by running PyTorch 2.13, see
# test_table_matches_torch).  A product keeps the other operand of each input that
# needs a gradient; pow, maximum and minimum keep both whatever needs one; div's
# two rules both read b; where keeps only its condition.
PRODUCT = {"a": "b", "b": "a", "ab": "ab"}
RAISES = {
    "add": {"a": "", "b": "", "ab": ""},
    "sub": {"a": "", "b": "", "ab": ""},
    "mul": PRODUCT,
    "div": {"a": "b", "b": "ab", "ab": "ab"},
    "pow": {"a": "ab", "b": "ab", "ab": "ab"},
    "maximum": {"a": "ab", "b": "ab", "ab": "ab"},
    "minimum": {"a": "ab", "b": "ab", "ab": "ab"},
    "where": {"a": "", "b": "", "ab": ""},
    **{name: PRODUCT for name in ("mul_broadcast", "mul_0d", "mul_one_element", "dot", "mv", "mm", "bmm",
                                  "matmul_vector_matrix", "matmul_broadcast", "linear")},
}
CASES = [(op, rg, changed) for op in OPS for rg in RG for changed in "ab"]
# The same error and versions, but PyTorch describes the kept tensor otherwise: its
# matmul saves the operand reshaped for mm ([1, 3] for a vector, [4, 3] for a batch
# folded into rows), and names a transposed weight changed with its input "AsStrided"
DESCRIBED_OTHERWISE = {("matmul_vector_matrix", "b", "a"), ("matmul_vector_matrix", "ab", "a"),
                       ("matmul_broadcast", "b", "a"), ("matmul_broadcast", "ab", "a"), ("linear", "ab", "b")}


def _values(op):
    rng = np.random.default_rng(sorted(OPS).index(op))
    _, sa, sb = OPS[op]
    return rng.uniform(0.5, 1.5, sa), rng.uniform(0.5, 1.5, sb)


def _run(m, op, rg, changed):
    """Forward, change input ``changed`` in place (under no_grad, as an optimizer
    step does), then backward: the gradients of the inputs that require grad, or the
    in-place error's message."""
    f = OPS[op][0]
    av, bv = _values(op)
    a = m.tensor(av, requires_grad=RG[rg][0])
    b = m.tensor(bv, requires_grad=RG[rg][1])
    y = f(m, a, b)
    with m.no_grad():
        (a if changed == "a" else b).add_(0.25)
    try:
        y.sum().backward()
    except RuntimeError as e:
        return str(e)
    return [None if t.grad is None else t.grad.numpy().copy() for t in (a, b)]


def _fresh_gradients(op, rg):
    """The gradients with nothing changed in place."""
    f = OPS[op][0]
    av, bv = _values(op)
    a = tg.tensor(av, requires_grad=RG[rg][0])
    b = tg.tensor(bv, requires_grad=RG[rg][1])
    f(tg, a, b).sum().backward()
    return [None if t.grad is None else t.grad.numpy() for t in (a, b)]


@pytest.mark.parametrize("op,rg,changed", CASES)
def test_inplace_change_raises_exactly_when_the_value_was_kept(op, rg, changed):
    got = _run(tg, op, rg, changed)
    if changed in RAISES[op][rg]:
        assert isinstance(got, str), "no error: %r" % (got,)
        shape = list(_values(op)[0 if changed == "a" else 1].shape)
        if op == "linear" and changed == "b":
            shape = shape[::-1]         # what the product kept: the transposed weight
        # (a transposed weight is named as the output of its transpose, T)
        assert re.match(r"one of the variables needed for gradient computation has been modified by an inplace "
                        r"operation: \[tapegrad.DoubleTensor \[%s\]\](, which is output 0 of T,)? is at version 1; "
                        r"expected version 0 instead." % ", ".join(map(str, shape)), got), got
    else:
        assert not isinstance(got, str), got
        # the gradients of the values as they were at forward: what was kept is unchanged
        want = _fresh_gradients(op, rg)
        for g, w, needs in zip(got, want, RG[rg]):
            assert (g is None) == (not needs)
            if needs:
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_gradients_after_a_change_the_rule_does_not_read():
    # literal: mul's gradient of a is b, mm's gradient of W is x^T G, whatever a or W became
    a = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = tg.tensor([4.0, 5.0, 6.0])
    y = a * b
    with tg.no_grad():
        a.mul_(10.0)
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [4.0, 5.0, 6.0])
    x = tg.tensor([[1.0, 2.0], [3.0, 4.0]])
    W = tg.tensor([[1.0, 0.0, -1.0], [2.0, 1.0, 0.0]], requires_grad=True)
    z = x @ W
    with tg.no_grad():
        W.zero_()
    z.sum().backward()
    np.testing.assert_array_equal(W.grad.numpy(), [[4.0, 4.0, 4.0], [6.0, 6.0, 6.0]])


@pytest.mark.parametrize("op,rg,changed", CASES)
def test_table_matches_torch(op, rg, changed):
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float64)
    try:
        want = _run(torch, op, rg, changed)
    finally:
        torch.set_default_dtype(torch.float32)
    got = _run(tg, op, rg, changed)
    assert isinstance(want, str) == (changed in RAISES[op][rg])     # the literal table is PyTorch's
    assert isinstance(got, str) == isinstance(want, str), (got, want)
    if isinstance(want, str):
        got, want = got[:got.index("instead.")].replace("tapegrad.", "torch."), want[:want.index("instead.")]
        if (op, rg, changed) in DESCRIBED_OTHERWISE:
            got, want = got[got.index(" is at version"):], want[want.index(" is at version"):]
        assert got == want
    else:
        for g, w in zip(got, want):
            assert (g is None) == (w is None)
            if w is not None:
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def _product_into_a_used_constant(m):
    w = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
    y = m.tensor([3.0, 4.0], dtype=m.float64)
    z = y + w                   # uses y, keeps nothing
    y.mul_(w)                   # w's gradient reads y as it was: the product keeps a copy
    (z + y).sum().backward()
    return w.grad.numpy()


def test_inplace_product_into_a_constant_used_before():
    np.testing.assert_array_equal(_product_into_a_used_constant(tg), [4.0, 5.0])


def test_inplace_product_into_a_constant_used_before_matches_torch():
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(_product_into_a_used_constant(tg), _product_into_a_used_constant(torch))


def test_saved_attributes_are_none_where_nothing_was_kept():
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    b = tg.tensor([3.0, 4.0])
    m = (a * b).grad_fn
    assert m._saved_self is None
    np.testing.assert_array_equal(m._saved_other.numpy(), [3.0, 4.0])
    m = (b * a).grad_fn
    np.testing.assert_array_equal(m._saved_self.numpy(), [3.0, 4.0])
    assert m._saved_other is None
    d = (a / b).grad_fn
    assert d._saved_self is None
    np.testing.assert_array_equal(d._saved_other.numpy(), [3.0, 4.0])
    d = (b / a).grad_fn
    np.testing.assert_array_equal(d._saved_self.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(d._saved_other.numpy(), [1.0, 2.0])


def test_hooks_retain_graph_and_freeing_with_one_input_requiring_grad():
    x = tg.tensor([1.0, 2.0, 3.0])
    w = tg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = x * w                   # keeps x only
    y.register_hook(lambda g: g * 2.0)
    loss = (y * 3.0).sum()
    loss.backward(retain_graph=True)
    np.testing.assert_array_equal(w.grad.numpy(), [6.0, 12.0, 18.0])
    with tg.no_grad():
        w.mul_(5.0)             # not kept: the retained graph still differentiates
    loss.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [12.0, 24.0, 36.0])
    with pytest.raises(RuntimeError, match="^Trying to backward through the graph a second time"):
        loss.backward()         # the product kept x, freed by the last backward


def test_saved_attributes_match_torch():
    torch = pytest.importorskip("torch")

    def kept(m):
        a = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        b = m.tensor([3.0, 4.0], dtype=m.float64)
        nodes = [(a * b).grad_fn, (b * a).grad_fn, (a / b).grad_fn, (b / a).grad_fn, (a * 2.0).grad_fn]
        return [(n._saved_self is None, n._saved_other is None) for n in nodes]
    assert kept(tg) == kept(torch) == [(True, False), (False, True), (True, False), (False, False), (True, False)]


# -- actor-critic / multi-loss: an optimizer step between two backward passes ------------
X = [[1.0, 2.0], [3.0, -1.0]]
W0 = [[1.0, 2.0], [3.0, 4.0]]
B0 = [0.5, -0.5]


def _two_losses(m, opt_name, lr):
    """One forward through a first-layer Linear (its input needs no gradient), two
    losses; step on the first, then backward and step on the second.  Returns the
    second loss's gradients and the final parameters."""
    lin = m.nn.Linear(2, 2)
    with m.no_grad():
        lin.weight.copy_(m.tensor(W0))
        lin.bias.copy_(m.tensor(B0))
    opt = getattr(m.optim, opt_name)(lin.parameters(), lr=lr)
    out = lin(m.tensor(X))
    critic = (out[:, 0] ** 2).sum()         # 5.5^2 + 1.5^2
    actor = out[:, 1].sum()
    opt.zero_grad()
    critic.backward(retain_graph=True)
    first = (lin.weight.grad.numpy().copy(), lin.bias.grad.numpy().copy())
    opt.step()
    opt.zero_grad()
    actor.backward()                        # through the same forward, after the step
    second = (lin.weight.grad.numpy().copy(), lin.bias.grad.numpy().copy())
    opt.step()
    return critic.item(), first, second, (lin.weight.detach().numpy().copy(), lin.bias.detach().numpy().copy())


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_step_between_two_backward_passes_of_one_forward(opt_name):
    lr = 0.1 if opt_name == "SGD" else 0.01
    loss1, first, second, final = _two_losses(tg, opt_name, lr)
    assert loss1 == 32.5
    # out = X W^T + b = [[5.5, 10.5], [1.5, 4.5]]; d critic / d out[:, 0] = [11, 3]
    np.testing.assert_allclose(first[0], [[20.0, 19.0], [0.0, 0.0]], rtol=1e-12)
    np.testing.assert_allclose(first[1], [14.0, 0.0], rtol=1e-12)
    # the actor's gradient reads only X, which the step did not change
    np.testing.assert_allclose(second[0], [[0.0, 0.0], [4.0, 1.0]], rtol=1e-12)
    np.testing.assert_allclose(second[1], [0.0, 2.0], rtol=1e-12)
    if opt_name == "SGD":
        np.testing.assert_allclose(final[0], [[-1.0, 0.1], [2.6, 3.9]], rtol=1e-12)
        np.testing.assert_allclose(final[1], [-0.9, -0.7], rtol=1e-12)


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_step_between_two_backward_passes_matches_torch(opt_name):
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float64)
    try:
        want = _two_losses(torch, opt_name, 0.01)
    finally:
        torch.set_default_dtype(torch.float32)
    got = _two_losses(tg, opt_name, 0.01)
    assert got[0] == want[0]
    for g, w in zip(got[1] + got[2] + got[3], want[1] + want[2] + want[3]):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)


def _second_layer_step(m):
    lin1, lin2 = m.nn.Linear(2, 3), m.nn.Linear(3, 1)
    opt = m.optim.SGD(list(lin1.parameters()) + list(lin2.parameters()), lr=0.1)
    out = lin2(m.tanh(lin1(m.tensor(X))))
    loss1, loss2 = out.sum(), (out ** 2).sum()
    loss1.backward(retain_graph=True)
    opt.step()
    loss2.backward()


def test_step_changing_a_kept_weight_still_raises():
    # the second layer's input requires grad, so its weight is kept: PyTorch raises too
    with pytest.raises(RuntimeError, match=r"^one of the variables needed for gradient computation has been "
                                           r"modified by an inplace operation: \[tapegrad.DoubleTensor \[3, 1\]\], "
                                           r"which is output 0 of T, is at version 2; expected version 1"):
        _second_layer_step(tg)


def test_step_changing_a_kept_weight_raises_in_torch():
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float64)
    try:
        with pytest.raises(RuntimeError, match=r"^one of the variables needed for gradient computation has been "
                                               r"modified by an inplace operation: \[torch.DoubleTensor \[3, 1\]\], "
                                               r"which is output 0 of AsStrided, is at version 2; expected "
                                               r"version 1"):
            _second_layer_step(torch)
    finally:
        torch.set_default_dtype(torch.float32)


# -- memory ---------------------------------------------------------------------------
def test_memory_stats_keep_only_the_input_of_a_first_layer():
    gc.collect()
    base = tg.core.tape.memory_stats()["saved_bytes"]
    lin = tg.nn.Linear(8, 16)
    x = tg.tensor(np.ones((32, 8)))
    out = lin(x)
    # x (32 x 8) for the weight's gradient; not the weight, not the bias
    assert tg.core.tape.memory_stats()["saved_bytes"] - base == 32 * 8 * 8
    out.sum().backward()
    assert tg.core.tape.memory_stats()["saved_bytes"] == base
    del out
    gc.collect()
    xg = tg.tensor(np.ones((32, 8)), requires_grad=True)
    out = lin(xg)
    # both operands of the product: x and the transposed weight (8 x 16)
    assert tg.core.tape.memory_stats()["saved_bytes"] - base == 32 * 8 * 8 + 8 * 16 * 8
    out.sum().backward()
    assert tg.core.tape.memory_stats()["saved_bytes"] == base


def test_memory_stats_of_a_product_keep_the_other_operand():
    gc.collect()
    base = tg.core.tape.memory_stats()["saved_bytes"]
    a = tg.ones(1000, requires_grad=True)
    y = a * tg.ones(1000) + tg.ones(1000)      # mul keeps its constant operand; add keeps nothing
    assert tg.core.tape.memory_stats()["saved_bytes"] - base == 8000
    y.sum().backward()
    assert tg.core.tape.memory_stats()["saved_bytes"] == base
    np.testing.assert_array_equal(a.grad.numpy(), np.ones(1000))


# -- gradients and second derivatives with one input requiring grad ---------------------
def _pair(rg, shapes=((3,), (3,))):
    rng = np.random.default_rng(0)
    return (tg.tensor(rng.uniform(0.5, 1.5, shapes[0]), requires_grad=rg[0]),
            tg.tensor(rng.uniform(0.5, 1.5, shapes[1]), requires_grad=rg[1]))


@pytest.mark.parametrize("rg", [(True, False), (False, True)])
@pytest.mark.parametrize("fn,shapes", [
    (lambda a, b: (a * b * a).sum(), ((3,), (3,))),
    (lambda a, b: (a / b + b / a).sum(), ((3,), (3,))),
    (lambda a, b: tg.sin(a @ b).sum(), ((2, 3), (3, 2))),
    (lambda a, b: (a * b).sum() ** 2, ((2, 3), (3,))),
])
def test_gradcheck_and_gradgradcheck_with_one_input_requiring_grad(rg, fn, shapes):
    a, b = _pair(rg, shapes)
    assert gradcheck(fn, (a, b))
    assert gradgradcheck(fn, (a, b))


def test_double_backward_through_a_product_with_one_input_requiring_grad():
    # y = a^2 * b with b constant: dy/da = 2ab, d2y/da2 = 2b (literal)
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    b = tg.tensor([3.0, 5.0])
    g, = tg.autograd.grad((a * a * b).sum(), a, create_graph=True)
    np.testing.assert_array_equal(g.detach().numpy(), [6.0, 20.0])
    h, = tg.autograd.grad(g.sum(), a)
    np.testing.assert_array_equal(h.numpy(), [6.0, 10.0])


def test_double_backward_after_a_change_the_first_rule_does_not_read():
    # g = a * b needs b; changing a afterwards is fine, in the second derivative too
    torch = pytest.importorskip("torch")
    got, want = [], []
    for m, out in ((tg, got), (torch, want)):
        a = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        b = m.tensor([3.0, 5.0], dtype=m.float64)
        y = (a * a * b).sum()
        g, = m.autograd.grad(y, a, create_graph=True)
        h, = m.autograd.grad((g * g).sum(), a)
        out.append(h.numpy())
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_array_equal(got[0], [2 * 6.0 * 6.0, 2 * 20.0 * 10.0])


# -- replay ---------------------------------------------------------------------------
def test_compiled_first_layer_steps_between_two_backward_passes():
    lin = tg.nn.Linear(2, 2)
    opt = tg.optim.SGD(lin.parameters(), lr=0.1)

    def losses(x):
        out = lin(x)
        return (out[:, 0] ** 2).sum(), out[:, 1].sum()

    step = tg.compile(losses)
    for call in range(3):           # a recording, then replays
        with tg.no_grad():
            lin.weight.copy_(tg.tensor(W0))
            lin.bias.copy_(tg.tensor(B0))
        critic, actor = step(np.array(X))
        assert critic.item() == 32.5
        opt.zero_grad()
        critic.backward(retain_graph=True)
        np.testing.assert_allclose(lin.weight.grad.numpy(), [[20.0, 19.0], [0.0, 0.0]], rtol=1e-12)
        opt.step()
        opt.zero_grad()
        actor.backward()
        np.testing.assert_allclose(lin.weight.grad.numpy(), [[0.0, 0.0], [4.0, 1.0]], rtol=1e-12)
        np.testing.assert_allclose(lin.bias.grad.numpy(), [0.0, 2.0], rtol=1e-12)
        opt.step()
        np.testing.assert_allclose(lin.weight.detach().numpy(), [[-1.0, 0.1], [2.6, 3.9]], rtol=1e-12)
    assert step.stats.replays == 2, step.stats


def test_compiled_step_changing_a_kept_weight_still_raises():
    # as eager (test_step_changing_a_kept_weight_still_raises): the replayed tape's
    # transposed weight is a view of the parameter and shares its version
    lin1, lin2 = tg.nn.Linear(2, 3), tg.nn.Linear(3, 1)
    opt = tg.optim.SGD(list(lin1.parameters()) + list(lin2.parameters()), lr=0.1)
    net = tg.compile(lambda x: lin2(tg.tanh(lin1(x))))
    for call in range(3):
        out = net(tg.tensor(X))
        loss1, loss2 = out.sum(), (out ** 2).sum()
        loss1.backward(retain_graph=True)
        opt.step()
        with pytest.raises(RuntimeError, match=r"^one of the variables needed for gradient computation has been "
                                               r"modified by an inplace operation: \[tapegrad.DoubleTensor \[3, 1\]\], "
                                               r"which is output 0 of T, is at version %d; expected version %d "
                                               % (call + 2, call + 1)):
            loss2.backward()
    assert net.stats.replays == 2, net.stats


@pytest.mark.parametrize("twice", [False, True])
def test_replayed_product_checks_only_what_it_kept(twice):
    w = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def loss(x):
        y = x * w               # keeps x only
        return ((y * w) if twice else y).sum()      # (y * w keeps y and w)

    step = tg.compile(loss)
    x = np.array([4.0, 5.0, 6.0])
    for call in range(3):
        with tg.no_grad():
            w.copy_(tg.tensor([1.0, 2.0, 3.0]))
        out = step(x)
        with tg.no_grad():
            w.add_(1.0)
        w.grad = None
        if twice:
            with pytest.raises(RuntimeError, match=r"modified by an inplace operation: \[tapegrad.DoubleTensor \[3\]\] "
                                                   r"is at version \d+; expected version \d+ instead"):
                out.backward()
        else:
            out.backward()
            np.testing.assert_array_equal(w.grad.numpy(), x)
    assert step.stats.replays == 2, step.stats


def test_replayed_tape_keeps_what_eager_execution_keeps():
    lin = tg.nn.Linear(8, 16)
    step = tg.compile(lambda x: lin(x))
    x = np.ones((32, 8))
    step(x)
    gc.collect()
    base = tg.core.tape.memory_stats()["saved_bytes"]
    out = step(x)                   # a replay: its tape keeps x, not the weight
    assert step.stats.replays == 1
    assert tg.core.tape.memory_stats()["saved_bytes"] - base == 32 * 8 * 8
    out.sum().backward()
    np.testing.assert_allclose(lin.weight.grad.numpy(), np.full((16, 8), 32.0))
