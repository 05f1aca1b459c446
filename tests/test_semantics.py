"""tapegrad against the observed PyTorch 2.13 autograd semantics
(/work/shared/reference/pytorch-autograd-semantics.md, sections 1-6 and the seed examples).

Deliberate differences: default dtype float64 (so "float32" cases use dtype=tg.float32),
reprs show ``dtype=tapegrad.float32``, the in-place error names ``tapegrad.DoubleTensor`` and
its hint ends with ``set_detect_anomaly(True).``.
"""
import inspect
import math
import re
import warnings

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core.tensor import Tensor

LN2 = math.log(2.0)

SCALAR_MSG = "grad can be implicitly created only for scalar outputs"
SECOND_MSG = ("Trying to backward through the graph a second time (or directly access saved tensors after "
              "they have already been freed). Saved intermediate values of the graph are freed when you call "
              ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
              "graph a second time or if you need to access saved tensors after calling backward.")
NO_GRAD_FN_MSG = "element 0 of tensors does not require grad and does not have a grad_fn"
NONLEAF_GRAD_MSG = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute won't "
    "be populated during autograd.backward(). If you indeed want the .grad field to be populated for a "
    "non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by "
    "mistake, make sure you access the leaf Tensor instead. See github.com/pytorch/pytorch/pull/30531 for "
    "more information.")
LEAF_INPLACE_MSG = "a leaf Variable that requires grad is being used in an in-place operation."
VIEW_LEAF_INPLACE_MSG = "a view of a leaf Variable that requires grad is being used in an in-place operation."
NO_GRAD_VIEW_MSG = (
    "A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given that this "
    "use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both the view "
    "and the inplace either both inside the no_grad block (if you don't want the inplace to be tracked) or "
    "both outside (if you want the inplace to be tracked).")


def inplace_msg(producer, version=1, expected=0, tname="DoubleTensor", shape="[2]"):
    return ("one of the variables needed for gradient computation has been modified by an inplace operation: "
            "[tapegrad.%s %s], which is output 0 of %s, is at version %d; expected version %d instead. "
            "Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
            "torch.autograd.set_detect_anomaly(True)." % (tname, shape, producer, version, expected))


def raises(exc, msg):
    return pytest.raises(exc, match="^" + re.escape(msg) + "$")


def vals(t):
    assert isinstance(t, Tensor), type(t)
    return t.detach().numpy()


def check(t, expected, dtype=None):
    """Exact values (nan == nan) and exact shape."""
    arr = vals(t)
    exp = np.asarray(expected, dtype=np.float64)
    assert arr.shape == exp.shape, (arr.shape, exp.shape)
    np.testing.assert_array_equal(arr, exp)
    if dtype is not None:
        assert arr.dtype == dtype, arr.dtype


def approx(t, expected):
    arr = vals(t)
    exp = np.asarray(expected, dtype=np.float64)
    assert arr.shape == exp.shape, (arr.shape, exp.shape)
    np.testing.assert_allclose(arr, exp, rtol=1e-12, atol=1e-15)


def leaf(data, dtype=None):
    return tg.tensor(data, dtype=dtype, requires_grad=True)


def grad_of(fn, data, upstream=None):
    x = leaf(data)
    y = fn(x)
    if upstream is None:
        y.sum().backward()
    else:
        y.backward(tg.tensor(upstream))
    return x.grad


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    yield
    tg.set_grad_enabled(True)


# =====================================================================================
# 1. Signatures, defaults, root handling
# =====================================================================================
def _sig(f):
    return [(p.name, p.default) for p in inspect.signature(f).parameters.values()]


def test_signature_tensor_backward():
    E = inspect.Parameter.empty
    assert _sig(Tensor.backward) == [("self", E), ("gradient", None), ("retain_graph", None),
                                     ("create_graph", False), ("inputs", None)]


def test_signature_autograd_backward():
    E = inspect.Parameter.empty
    assert _sig(tg.autograd.backward) == [("tensors", E), ("grad_tensors", None), ("retain_graph", None),
                                          ("create_graph", False), ("grad_variables", None), ("inputs", None)]


def test_signature_autograd_grad():
    E = inspect.Parameter.empty
    assert _sig(tg.autograd.grad) == [("outputs", E), ("inputs", E), ("grad_outputs", None),
                                      ("retain_graph", None), ("create_graph", False), ("only_inputs", True),
                                      ("allow_unused", None), ("is_grads_batched", False),
                                      ("materialize_grads", False)]


def test_grad_variables_works_with_future_warning():
    x = leaf([1., 2.])
    with pytest.warns(FutureWarning, match="^" + re.escape(
            "`grad_variables` is deprecated. Use `grad_tensors` instead.") + "$"):
        tg.autograd.backward(x * 2, grad_variables=tg.tensor([1., 10.]))
    check(x.grad, [2., 20.])


def test_grad_variables_and_grad_tensors_both():
    x = leaf([1., 2.])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with raises(RuntimeError, "`grad_tensors` and `grad_variables` (deprecated) arguments both passed to "
                                  "`backward()`. Please only use `grad_tensors`."):
            tg.autograd.backward(x * 2, grad_tensors=tg.ones(2), grad_variables=tg.ones(2))


def test_tensor_backward_rejects_grad_variables():
    x = leaf([1., 2.])
    with raises(TypeError, "Tensor.backward() got an unexpected keyword argument 'grad_variables'"):
        (x * 2).backward(grad_variables=tg.ones(2))


def test_only_inputs_false_warns():
    x = leaf([1., 2.])
    msg = ("only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate gradient "
           "for other parts of the graph, please use torch.autograd.backward.")
    with pytest.warns(FutureWarning, match="^" + re.escape(msg) + "$"):
        (g,) = tg.autograd.grad((x * 2).sum(), x, only_inputs=False)
    check(g, [2., 2.])


@pytest.mark.parametrize("shape,expected", [((1,), [2.]), ((1, 1), [[2.]])])
def test_implicit_ones_for_numel_one(shape, expected):
    x = leaf(np.ones(shape))
    (x * 2).backward()
    check(x.grad, expected)


def test_implicit_ones_rejected_for_empty_output():
    x = leaf(np.zeros(0))
    with raises(RuntimeError, SCALAR_MSG):
        (x * 2).backward()


def test_explicit_gradient_shape_1_for_0d_rejected():
    x = leaf(2.)
    with raises(RuntimeError, "Mismatch in shape: grad_output[0] has a shape of torch.Size([1]) and output[0] "
                              "has a shape of torch.Size([])."):
        (x * 2).backward(tg.ones(1))


def test_explicit_gradient_broadcastable_shape_rejected():
    x = leaf([[1., 2.]])
    with raises(RuntimeError, "Mismatch in shape: grad_output[0] has a shape of torch.Size([2]) and output[0] "
                              "has a shape of torch.Size([1, 2])."):
        (x * 2).backward(tg.ones(2))


@pytest.mark.parametrize("gdtype", [tg.float64, tg.int64])
def test_explicit_gradient_dtype_may_differ(gdtype):
    x = leaf([1., 2.], dtype=tg.float32)
    (x * 2).backward(tg.tensor([1, 3], dtype=gdtype))
    check(x.grad, [2., 6.], dtype=np.float32)


def test_several_roots_with_none_for_scalar():
    a = leaf([1., 2.])
    y1 = 3 * a
    y2 = (a * a).sum()
    tg.autograd.backward([y1, y2], grad_tensors=[tg.tensor([1., 10.]), None])
    check(a.grad, [5., 34.])


def test_several_roots_none_for_nonscalar_root():
    a = leaf([1., 2.])
    with raises(RuntimeError, SCALAR_MSG):
        tg.autograd.backward([a * 3, (a * a).sum()], grad_tensors=[None, None])


def test_single_tensor_for_tensors_and_grad_tensors():
    a = leaf([1., 2.])
    tg.autograd.backward(a * 3, grad_tensors=tg.tensor([1., 10.]))
    check(a.grad, [3., 30.])


def test_tuples_for_tensors_and_grad_tensors():
    a = leaf([1., 2.])
    tg.autograd.backward((a * 3, (a * a).sum()), grad_tensors=(tg.tensor([1., 10.]), None))
    check(a.grad, [5., 34.])


def test_two_scalar_roots_no_grad_tensors():
    a = leaf([1., 2.])
    tg.autograd.backward([(3 * a).sum(), (4 * a).sum()])
    check(a.grad, [7., 7.])


def test_roots_gradients_length_mismatch():
    a = leaf([1., 2.])
    with raises(RuntimeError, "got 2 tensors and 1 gradients"):
        tg.autograd.backward([(3 * a).sum(), (4 * a).sum()], grad_tensors=[tg.tensor(1.)])


@pytest.mark.parametrize("as_list", [True, False])
def test_backward_inputs_fills_only_listed(as_list):
    a = leaf([1., 2.])
    b = leaf([3., 4.])
    (a * b).sum().backward(inputs=[a] if as_list else a)
    check(a.grad, [3., 4.])
    assert b.grad is None


def test_backward_inputs_empty():
    a = leaf([1., 2.])
    with raises(RuntimeError, "`inputs` argument to `backward()` cannot be empty."):
        (a * 2).sum().backward(inputs=[])


def test_backward_inputs_nonleaf_gets_grad():
    x = leaf([1., 2.])
    m = x * 2
    (m * m).sum().backward(inputs=[m])
    check(m.grad, [4., 8.])
    assert x.grad is None


def test_backward_inputs_not_requiring_grad():
    a = leaf([1., 2.])
    c = tg.tensor([1., 1.])
    with raises(RuntimeError, "can't retain_grad on Tensor that has requires_grad=False"):
        (a * c).sum().backward(inputs=[c])


def test_backward_inputs_unused_leaves_none():
    a = leaf([1., 2.])
    z = leaf([1., 2.])
    (a * 2).sum().backward(inputs=[a, z])
    check(a.grad, [2., 2.])
    assert z.grad is None


def test_backward_returns_none():
    a = leaf([1., 2.])
    assert (a * 2).sum().backward() is None
    assert tg.autograd.backward((a * 2).sum()) is None


def test_grad_returns_tuple_and_leaves_grad_untouched():
    x = leaf([1., 2.])
    r = tg.autograd.grad((x * x).sum(), x)
    assert type(r) is tuple and len(r) == 1
    check(r[0], [2., 4.])
    assert x.grad is None


def test_grad_several_outputs_summed():
    x = leaf([1., 2.])
    (g,) = tg.autograd.grad([(2 * x).sum(), (3 * x).sum()], [x])
    check(g, [5., 5.])


def test_grad_outputs_with_none_for_scalar():
    x = leaf([1., 2.])
    (g,) = tg.autograd.grad([x * 2, (x * x).sum()], x, grad_outputs=[tg.tensor([1., 10.]), None])
    check(g, [4., 24.])


def test_grad_of_input_wrt_itself():
    x = leaf([1., 2.])
    (g,) = tg.autograd.grad(x, x, grad_outputs=tg.ones(2))
    check(g, [1., 1.])


def test_grad_same_input_twice():
    x = leaf([1., 2.])
    g1, g2 = tg.autograd.grad((x * x).sum(), [x, x])
    check(g1, [2., 4.])
    check(g2, [2., 4.])


def test_grad_allow_unused():
    x = leaf([1., 2.])
    z = leaf([1., 2.])
    gx, gz = tg.autograd.grad((x * x).sum(), [x, z], allow_unused=True)
    check(gx, [2., 4.])
    assert gz is None


def test_grad_materialize_grads():
    x = leaf([1., 2.])
    z = leaf([1., 2.])
    gx, gz = tg.autograd.grad((x * x).sum(), [x, z], materialize_grads=True)
    check(gx, [2., 4.])
    check(gz, [0., 0.])


def test_grad_materialize_with_allow_unused_false():
    x = leaf([1., 2.])
    with raises(ValueError, "Expected allow_unused to be True or not passed when materialize_grads=True, but "
                            "got: allow_unused=False."):
        tg.autograd.grad((x * x).sum(), x, materialize_grads=True, allow_unused=False)


def test_grad_input_not_requiring_grad():
    x = leaf([1., 2.])
    c = tg.tensor([1., 2.])
    with raises(RuntimeError, "One of the differentiated Tensors does not require grad"):
        tg.autograd.grad((x * c).sum(), [x, c])


def test_grad_output_not_requiring_grad():
    x = leaf([1., 2.])
    with raises(RuntimeError, NO_GRAD_FN_MSG):
        tg.autograd.grad(tg.tensor(1.), x)


# =====================================================================================
# 2. Exact exception and warning messages
# =====================================================================================
def test_msg_implicit_nonscalar_backward():
    x = leaf([1., 2.])
    with raises(RuntimeError, SCALAR_MSG):
        (x * 2).backward()
    assert x.grad is None


def test_msg_implicit_nonscalar_grad():
    x = leaf([1., 2.])
    with raises(RuntimeError, SCALAR_MSG):
        tg.autograd.grad(x * 2, x)


SHAPE_MSG = ("Mismatch in shape: grad_output[0] has a shape of torch.Size([3]) and output[0] has a shape of "
             "torch.Size([2]).")


def test_msg_shape_mismatch_backward():
    x = leaf([1., 2.])
    with raises(RuntimeError, SHAPE_MSG):
        (x * 2).backward(tg.ones(3))


def test_msg_shape_mismatch_grad():
    x = leaf([1., 2.])
    with raises(RuntimeError, SHAPE_MSG):
        tg.autograd.grad(x * 2, x, grad_outputs=tg.ones(3))


def test_msg_second_backward():
    x = leaf([1., 2.])
    y = (x * x).sum()
    y.backward()
    with raises(RuntimeError, SECOND_MSG):
        y.backward()


def test_msg_second_grad():
    x = leaf([1., 2.])
    y = (x * x).sum()
    tg.autograd.grad(y, x)
    with raises(RuntimeError, SECOND_MSG):
        tg.autograd.grad(y, x)


def test_msg_no_grad_fn_plain_tensor():
    x = tg.tensor([1., 2.])
    with raises(RuntimeError, NO_GRAD_FN_MSG):
        (x * 2).sum().backward()


def test_msg_no_grad_fn_leaf_without_rg():
    with raises(RuntimeError, NO_GRAD_FN_MSG):
        tg.tensor(1.).backward()


def test_msg_no_grad_fn_under_no_grad():
    x = leaf([1., 2.])
    with tg.no_grad():
        y = (x * 2).sum()
    with raises(RuntimeError, NO_GRAD_FN_MSG):
        y.backward()


def test_msg_inplace_modified_exp():
    x = leaf([1., 2.])
    y = x.exp()
    z = (y * 1).sum()
    y.add_(1)
    with raises(RuntimeError, inplace_msg("Exp")):
        z.backward()


def test_msg_nonleaf_grad_access_warns_even_before_backward():
    x = leaf([1., 2.])
    y = x * 2
    with pytest.warns(UserWarning, match="^" + re.escape(NONLEAF_GRAD_MSG) + "$"):
        assert y.grad is None
    y.sum().backward()
    with pytest.warns(UserWarning, match="^" + re.escape(NONLEAF_GRAD_MSG) + "$"):
        assert y.grad is None


@pytest.mark.parametrize("allow_unused", ["default", False])
def test_msg_unused_input(allow_unused):
    x = leaf([1., 2.])
    z = leaf([1., 2.])
    kw = {} if allow_unused == "default" else {"allow_unused": False}
    with raises(RuntimeError, "The differentiated Tensor at index 1 appears to not have been used in the graph. "
                              "Set allow_unused=True if this is the desired behavior."):
        tg.autograd.grad((x * x).sum(), [x, z], **kw)


CREATE_INT_MSG = "Only Tensors of floating point and complex dtype can require gradients"


@pytest.mark.parametrize("make", [
    lambda: tg.tensor([1, 2], requires_grad=True),
    lambda: tg.ones(2, dtype=tg.long, requires_grad=True),
    lambda: tg.arange(3, requires_grad=True),
    lambda: tg.tensor([True, False], requires_grad=True),
])
def test_msg_int_requires_grad_at_creation(make):
    with raises(RuntimeError, CREATE_INT_MSG):
        make()


def test_msg_int_requires_grad_():
    with raises(RuntimeError, "only Tensors of floating point dtype can require gradients"):
        tg.tensor([1, 2]).requires_grad_()


def test_msg_int_requires_grad_setter():
    t = tg.tensor([1, 2])
    with raises(RuntimeError, "only Tensors of floating point and complex dtype can require gradients"):
        t.requires_grad = True


@pytest.mark.parametrize("call", [
    lambda x: tg.autograd.backward(x * 2, grad_tensors=[1., 1.]),
    lambda x: (x * 2).backward([1., 1.]),
    lambda x: tg.autograd.grad(x * 2, x, grad_outputs=[1., 1.]),
])
def test_msg_gradient_float_list(call):
    x = leaf([1., 2.])
    with raises(TypeError, "gradients can be either Tensors or None, but got float"):
        call(x)


def test_msg_gradient_str():
    x = leaf([1., 2.])
    with raises(TypeError, "gradients can be either Tensors or None, but got str"):
        (x * 2).backward('ab')


@pytest.mark.parametrize("call", [
    lambda x: tg.autograd.backward(x * 2, grad_tensors=1),
    lambda x: (x * 2).backward(1),
    lambda x: tg.autograd.grad(x * 2, x, grad_outputs=1),
])
def test_msg_gradient_int(call):
    x = leaf([1., 2.])
    with raises(TypeError, "'int' object is not iterable"):
        call(x)


def test_msg_gradient_float_for_scalar():
    x = leaf(2.)
    with raises(TypeError, "'float' object is not iterable"):
        (x * 2).backward(2.0)


NUMPY_MSG = "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."


def test_msg_numpy_on_leaf_and_nonleaf():
    x = leaf([1., 2.])
    with raises(RuntimeError, NUMPY_MSG):
        x.numpy()
    with raises(RuntimeError, NUMPY_MSG):
        (x * 2).numpy()
    with raises(RuntimeError, NUMPY_MSG):
        np.asarray(x)
    np.testing.assert_array_equal(x.numpy(force=True), [1., 2.])
    np.testing.assert_array_equal(x.detach().numpy(), [1., 2.])


@pytest.mark.parametrize("op", ["add_", "iadd", "zero_"])
def test_msg_inplace_on_leaf(op):
    x = leaf([1., 2.])
    with raises(RuntimeError, LEAF_INPLACE_MSG):
        if op == "add_":
            x.add_(1)
        elif op == "iadd":
            x += 1
        else:
            x.zero_()
    check(x, [1., 2.])


def test_msg_setitem_on_leaf():
    x = leaf([1., 2.])
    with raises(RuntimeError, VIEW_LEAF_INPLACE_MSG):
        x[0] = 5.
    check(x, [1., 2.])


def test_msg_inplace_on_view_of_leaf():
    x = leaf([1., 2.])
    with raises(RuntimeError, VIEW_LEAF_INPLACE_MSG):
        x.view(2).add_(1)


def test_msg_requires_grad_on_nonleaf():
    x = leaf([1., 2.])
    msg = ("you can only change requires_grad flags of leaf variables. If you want to use a computed variable in "
           "a subgraph that doesn't require differentiation use var_no_grad = var.detach().")
    with raises(RuntimeError, msg):
        (x * 2).requires_grad = False
    with raises(RuntimeError, msg):
        (x * 2).requires_grad_(False)


def test_msg_grad_assign_size():
    x = leaf([1., 2.])
    with raises(RuntimeError, "attempting to assign a gradient of size '[3]' to a tensor of size '[2]'. Please "
                              "ensure that the gradient and the tensor are the same size"):
        x.grad = tg.ones(3)


def test_msg_grad_assign_dtype():
    x = leaf([1., 2.], dtype=tg.float32)
    with raises(RuntimeError,
                "attempting to assign a gradient with dtype 'double' to a tensor with grad_dtype 'Float'. The "
                "gradient must match the tensor's grad_dtype (defaults to the tensor's dtype). You can set the "
                "tensor's grad_dtype attribute with a specific dtype, or None to allow any dtype. Set grad_dtype "
                "with caution. Diverging the dtypes of a tensor and its gradient may break downstream systems "
                "that assume they match."):
        x.grad = tg.ones(2, dtype=tg.float64)


def test_msg_grad_assign_list():
    x = leaf([1., 2.])
    with raises(TypeError, "assigned grad expected to be a Tensor or None but got grad of type list"):
        x.grad = [1., 2.]


def test_msg_hook_on_tensor_without_rg():
    with raises(RuntimeError, "cannot register a hook on a tensor that doesn't require gradient"):
        tg.tensor([1.]).register_hook(lambda g: g)


def test_msg_hook_changes_size():
    x = leaf([1., 2.])
    x.register_hook(lambda g: tg.ones(3))
    with raises(RuntimeError, "hook '<lambda>' has changed the size of value"):
        (x * 2).sum().backward()


def test_msg_hook_changes_type():
    # torch: "(was torch.FloatTensor got torch.DoubleTensor)"; tapegrad names its own types, as in the
    # in-place message.
    x = leaf([1., 2.], dtype=tg.float32)
    x.register_hook(lambda g: g.double())
    with raises(RuntimeError, "hook '<lambda>' has changed the type of value "
                              "(was tapegrad.FloatTensor got tapegrad.DoubleTensor)"):
        (x * 2).sum().backward()


def test_msg_hook_returns_int():
    x = leaf([1., 2.])
    x.register_hook(lambda g: 5)
    with raises(TypeError, "expected Variable, but hook returned 'int'"):
        (x * 2).sum().backward()


def test_msg_float_conversion_warns():
    x = leaf([1., 2.])
    with pytest.warns(UserWarning, match="^" + re.escape(
            "Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior.\n"
            "Consider using tensor.detach() first.") + "$"):
        assert float(x[0]) == 1.0


def test_no_warning_for_item_int_tolist_bool():
    x = leaf([1., 2.])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x[0].item() == 1.0
        assert int(x[1]) == 2
        assert x.tolist() == [1., 2.]
        assert bool(x[0]) is True


def test_msg_view_made_in_no_grad_modified_inplace():
    x = leaf([1., 2.])
    y = x * 2
    with tg.no_grad():
        v = y[0:1]
    with raises(RuntimeError, NO_GRAD_VIEW_MSG):
        v.mul_(2)


def test_msg_view_of_leaf_made_in_no_grad_modified_inplace():
    x = leaf([1., 2.])
    with tg.no_grad():
        v = x.view(2)
    with raises(RuntimeError, NO_GRAD_VIEW_MSG):
        v.mul_(2)


# -- notes on the table ---------------------------------------------------------------
def test_second_backward_ok_when_nothing_saved():
    x = leaf([1., 2.])
    y = (x + 1).sum()
    y.backward()
    y.backward()
    check(x.grad, [2., 2.])


@pytest.mark.parametrize("f", [lambda x: (x * 2).sum(), lambda x: x.exp().sum(), lambda x: (x * x).sum()],
                         ids=["mul_scalar", "exp", "x_times_x"])
def test_second_backward_fails_when_saved(f):
    x = leaf([1., 2.])
    y = f(x)
    y.backward()
    with raises(RuntimeError, SECOND_MSG):
        y.backward()


def test_inplace_msg_names_copyslices():
    x = leaf([1., 2.])
    y = x * 2
    z = (y * y).sum()
    y[0] = 0.
    with raises(RuntimeError, inplace_msg("torch::autograd::CopySlices")):
        z.backward()


@pytest.mark.parametrize("producer,make", [("Mul", lambda x: x * 2), ("Sigmoid", lambda x: x.sigmoid())])
def test_inplace_msg_names_producer(producer, make):
    x = leaf([1., 2.])
    y = make(x)
    z = (y * y).sum()
    y.mul_(2)
    with raises(RuntimeError, inplace_msg(producer)):
        z.backward()


def test_inplace_on_unsaved_tensor_is_fine():
    a = leaf([1., 2.])
    b = a * 2
    c = b + 1
    b.mul_(3)
    c.sum().backward()
    check(a.grad, [2., 2.])


def test_inplace_through_detach_detected():
    x = leaf([1., 2.])
    y = x.exp()
    z = (y * 1).sum()
    y.detach().zero_()
    with raises(RuntimeError, inplace_msg("Exp")):
        z.backward()


def test_inplace_through_data_is_detected():
    # Deliberate difference from PyTorch (which silently gives [0., 0.] here):
    # .data shares the version counter, so a saved value changed through it is
    # reported instead of producing a wrong gradient.
    x = leaf([1., 2.])
    y = x.exp()
    y.data.zero_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


# =====================================================================================
# 3. Accumulation, retain_grad, hooks, reprs, graph
# =====================================================================================
def test_accumulation_in_place():
    x = leaf([1., 2.])
    assert x.grad is None
    (x * 3).sum().backward()
    g = x.grad
    check(g, [3., 3.])
    (x * 3).sum().backward()
    assert x.grad is g
    check(g, [6., 6.])
    (x * 3).sum().backward()
    assert x.grad is g
    check(g, [9., 9.])


def test_first_gradient_copied_leaf_root():
    x = leaf([1., 2.])
    g = tg.tensor([1., 1.])
    x.backward(g)
    check(x.grad, [1., 1.])
    assert not np.shares_memory(x.grad.numpy(), g.numpy())
    g.numpy()[:] = 7.
    check(x.grad, [1., 1.])


def test_first_gradient_copied_nonleaf_root():
    x = leaf([1., 2.])
    g = tg.tensor([1., 1.])
    (x * 1).backward(g)
    check(x.grad, [1., 1.])
    assert not np.shares_memory(x.grad.numpy(), g.numpy())


def test_retain_grad_nonleaf():
    x = leaf([1., 2.])
    y = x * 2
    y.retain_grad()
    (y * y).sum().backward()
    check(y.grad, [4., 8.])
    assert y.retains_grad is True


def test_retain_grad_on_leaf_does_nothing():
    x = leaf([1., 2.])
    x.retain_grad()
    assert x.retains_grad is False
    (x * 2).sum().backward()
    check(x.grad, [2., 2.])


def test_retained_grad_accumulates():
    x = leaf([1., 2.])
    y = x * 2
    y.retain_grad()
    z = (y * y).sum()
    z.backward(retain_graph=True)
    z.backward()
    check(y.grad, [8., 16.])


def test_hooks_run_in_order_and_chain():
    x = leaf([1., 2.])
    y = x * 2
    seen = []

    def h1(g):
        seen.append(("h1", vals(g).tolist()))

    def h2(g):
        seen.append(("h2", vals(g).tolist()))
        return g * 10

    def h3(g):
        seen.append(("h3", vals(g).tolist()))

    y.register_hook(h1)
    y.register_hook(h2)
    y.register_hook(h3)
    (y * y).sum().backward()
    assert seen == [("h1", [4., 8.]), ("h2", [4., 8.]), ("h3", [40., 80.])]
    check(x.grad, [80., 160.])


def test_leaf_hook_replaces_gradient():
    x = leaf([1., 2.])
    x.register_hook(lambda g: g * 100)
    (x * 1).sum().backward()
    check(x.grad, [100., 100.])


def test_leaf_hook_sees_incoming_not_accumulated():
    x = leaf([1., 2.])
    seen = []
    x.register_hook(lambda g: seen.append(vals(g).tolist()))
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    assert seen == [[3., 3.], [3., 3.]]
    check(x.grad, [6., 6.])


def test_hook_handle_remove():
    x = leaf([1., 2.])
    h = x.register_hook(lambda g: g * 100)
    h.remove()
    (x * 1).sum().backward()
    check(x.grad, [1., 1.])


def test_hook_on_tensor_used_twice_called_once():
    x = leaf([1., 2.])
    y = x * 1
    calls = []
    y.register_hook(lambda g: calls.append(vals(g).tolist()))
    (y + y * 3).sum().backward()
    assert calls == [[4., 4.]]


@pytest.mark.parametrize("hook_first", [True, False])
def test_retain_grad_is_after_hooks(hook_first):
    x = leaf([1., 2.])
    y = x * 2
    if hook_first:
        y.register_hook(lambda g: g * 10)
        y.retain_grad()
    else:
        y.retain_grad()
        y.register_hook(lambda g: g * 10)
    y.sum().backward()
    check(y.grad, [10., 10.])
    check(x.grad, [20., 20.])


def test_post_accumulate_grad_hook():
    p = leaf([1., 2.])
    seen = []
    p.register_post_accumulate_grad_hook(lambda t: seen.append((t is p, vals(t.grad).tolist())))
    (p * 3).sum().backward()
    assert seen == [(True, [3., 3.])]


def test_constant_operand_grad_none_and_no_warning():
    x = leaf([1., 2.])
    c = tg.tensor([3., 4.])
    (x * c).sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert c.grad is None
    assert c.is_leaf is True


def test_is_leaf_values():
    plain = tg.tensor([1., 2.])
    b = leaf([1., 2.])
    assert plain.is_leaf is True
    assert b.is_leaf is True
    assert (b * 2).is_leaf is False
    assert (plain * 2).is_leaf is True
    assert b.detach().is_leaf is True
    assert b.clone().is_leaf is False
    assert b.float().is_leaf is False      # the dtype-changing conversion (torch: b.double())
    with tg.no_grad():
        n = b * 2
    assert n.is_leaf is True and n.requires_grad is False


def test_detach_shares_storage():
    b = leaf([1., 2.])
    d = b.detach()
    d[0] = 9.
    check(b, [9., 2.])


@pytest.mark.parametrize("make", [lambda x: x[0:1], lambda x: x.view(2)], ids=["slice", "view"])
def test_view_of_leaf_made_under_no_grad(make):
    x = leaf([1., 2.])
    with tg.no_grad():
        v = make(x)
    assert v.requires_grad is True
    assert v.grad_fn is None
    assert v.is_leaf is True
    (v * 2).sum().backward()
    assert x.grad is None


def test_no_grad_forms():
    x = leaf([1., 2.])
    with tg.no_grad():
        assert (x * 2).requires_grad is False
        with tg.enable_grad():
            assert (x * 2).requires_grad is True

    @tg.no_grad()
    def f1():
        return x * 2

    @tg.no_grad
    def f2():
        return x * 2

    assert f1().requires_grad is False
    assert f2().requires_grad is False
    assert (x * 2).requires_grad is True


def test_set_grad_enabled_call_and_context():
    x = leaf([1., 2.])
    tg.set_grad_enabled(False)
    try:
        assert (x * 2).requires_grad is False
    finally:
        tg.set_grad_enabled(True)
    assert (x * 2).requires_grad is True
    with tg.set_grad_enabled(False):
        assert (x * 2).requires_grad is False
    assert (x * 2).requires_grad is True


def test_grad_mode_restored_after_exception():
    with pytest.raises(ZeroDivisionError):
        with tg.no_grad():
            1 / 0
    assert tg.is_grad_enabled() is True


def test_requires_grad_creation_inside_no_grad():
    with tg.no_grad():
        t = tg.ones(2, requires_grad=True)
    assert t.requires_grad is True


# -- Repr ---------------------------------------------------------------------------
def _wab():
    return leaf([[1., 2.]]), leaf([1., -2., 3.]), leaf([2., 2., 2.])


def test_repr_leaf_and_str_equal():
    w, a, b = _wab()
    assert repr(w) == "tensor([[1., 2.]], requires_grad=True)"
    assert str(w) == repr(w)


@pytest.mark.parametrize("make", [lambda w, xx: tg.mm(w, xx), lambda w, xx: tg.matmul(w, xx),
                                  lambda w, xx: w @ xx])
def test_repr_mm(make):
    w, a, b = _wab()
    r = make(w, tg.tensor([[1., 1.], [2., 2.]]))
    assert repr(r) == "tensor([[5., 5.]], grad_fn=<MmBackward0>)"
    assert str(r) == repr(r)


def test_repr_sum_add():
    w, a, b = _wab()
    assert repr(a.sum()) == "tensor(2., grad_fn=<SumBackward0>)"
    assert repr(a + b) == "tensor([3., 0., 5.], grad_fn=<AddBackward0>)"
    assert repr(a ** 2) == "tensor([1., 4., 9.], grad_fn=<PowBackward0>)"
    assert repr(a[0]) == "tensor(1., grad_fn=<SelectBackward0>)"
    assert repr(tg.relu(a)) == "tensor([1., 0., 3.], grad_fn=<ReluBackward0>)"
    assert repr(a.mean()) == "tensor(0.6667, grad_fn=<MeanBackward0>)"


def test_repr_float_conversion():
    w, a, b = _wab()
    assert repr(a.float()) == "tensor([ 1., -2.,  3.], dtype=tapegrad.float32, grad_fn=<ToCopyBackward0>)"


def test_repr_noop_conversion_returns_leaf():
    w, a, b = _wab()
    assert a.double() is a      # no-op conversion returns the leaf itself
    assert repr(a.double()) == "tensor([ 1., -2.,  3.], requires_grad=True)"


def test_repr_detach():
    w, a, b = _wab()
    assert repr(a.detach()) == "tensor([ 1., -2.,  3.])"


def test_repr_reshape_column():
    w, a, b = _wab()
    assert repr(a.reshape(3, 1)) == "tensor([[ 1.],\n        [-2.],\n        [ 3.]], grad_fn=<ViewBackward0>)"


def test_repr_setitem():
    x = leaf([1., 2., 3.])
    y = x * 2
    y[0] = 100.
    assert y.grad_fn.name() == "CopySlices"
    z = x * 2
    z[[0, 0]] = tg.tensor([7., 8.])
    assert z.grad_fn.name() == "IndexPutBackward0"
    with tg.no_grad():
        q = x * 2
        q[0] = 1.
    assert repr(q) == "tensor([1., 4., 6.])"


def _grad_fn_cases():
    xx = tg.tensor([[1., 1.], [2., 2.]])
    return [
        ("sum", lambda w, a, b: a.sum(), "SumBackward0"),
        ("sum_dim", lambda w, a, b: a.reshape(3, 1).sum(0), "SumBackward1"),
        ("add", lambda w, a, b: a + b, "AddBackward0"),
        ("add_scalar", lambda w, a, b: a + 1, "AddBackward0"),
        ("radd_scalar", lambda w, a, b: 1 + a, "AddBackward0"),
        ("sub", lambda w, a, b: a - b, "SubBackward0"),
        ("rsub", lambda w, a, b: 1 - a, "RsubBackward1"),
        ("mul", lambda w, a, b: a * b, "MulBackward0"),
        ("mul_scalar", lambda w, a, b: a * 2, "MulBackward0"),
        ("div", lambda w, a, b: a / b, "DivBackward0"),
        ("div_scalar", lambda w, a, b: a / 2, "DivBackward0"),
        ("neg", lambda w, a, b: -a, "NegBackward0"),
        ("pow", lambda w, a, b: a ** 2, "PowBackward0"),
        ("pow_tensor", lambda w, a, b: a ** b, "PowBackward1"),
        ("rpow", lambda w, a, b: 2 ** a, "PowBackward2"),
        ("select", lambda w, a, b: a[0], "SelectBackward0"),
        ("select2", lambda w, a, b: tg.mm(w, xx)[0][0], "SelectBackward0"),
        ("select3", lambda w, a, b: tg.mm(w, xx)[0, 1], "SelectBackward0"),
        ("slice", lambda w, a, b: a[1:], "SliceBackward0"),
        ("index_list", lambda w, a, b: a[[0, 0]], "IndexBackward0"),
        ("index_mask", lambda w, a, b: a[a > 0], "IndexBackward0"),
        ("reshape", lambda w, a, b: a.reshape(3, 1), "ViewBackward0"),
        ("view", lambda w, a, b: a.view(3, 1), "ViewBackward0"),
        ("flatten", lambda w, a, b: w.flatten(), "ViewBackward0"),
        ("relu", lambda w, a, b: tg.relu(a), "ReluBackward0"),
        ("exp", lambda w, a, b: a.exp(), "ExpBackward0"),
        ("mean", lambda w, a, b: a.mean(), "MeanBackward0"),
        ("sigmoid", lambda w, a, b: a.sigmoid(), "SigmoidBackward0"),
        ("tanh", lambda w, a, b: a.tanh(), "TanhBackward0"),
        ("log", lambda w, a, b: b.log(), "LogBackward0"),
        ("sqrt", lambda w, a, b: b.sqrt(), "SqrtBackward0"),
        ("abs", lambda w, a, b: a.abs(), "AbsBackward0"),
        ("dot", lambda w, a, b: tg.matmul(a, b), "DotBackward0"),
        ("mv", lambda w, a, b: tg.ones(2, 3) @ a, "MvBackward0"),
        ("vm", lambda w, a, b: a @ tg.ones(3, 2), "SqueezeBackward4"),
        ("bmm", lambda w, a, b: (a * tg.ones(2, 4, 3)) @ tg.ones(3, 5), "UnsafeViewBackward0"),
        ("max_full", lambda w, a, b: a.max(), "MaxBackward1"),
        ("max_dim", lambda w, a, b: w.max(dim=1).values, "MaxBackward0"),
        ("clamp", lambda w, a, b: a.clamp(0, 1), "ClampBackward1"),
        ("t", lambda w, a, b: w.t(), "TBackward0"),
        ("T", lambda w, a, b: w.T, "PermuteBackward0"),
        ("cat", lambda w, a, b: tg.cat([a, b]), "CatBackward0"),
        ("stack", lambda w, a, b: tg.stack([a, b]), "StackBackward0"),
        ("expand", lambda w, a, b: a.expand(2, 3), "ExpandBackward0"),
        ("clone", lambda w, a, b: a.clone(), "CloneBackward0"),
        ("squeeze", lambda w, a, b: w.squeeze(), "SqueezeBackward0"),
        ("unsqueeze", lambda w, a, b: a.unsqueeze(0), "UnsqueezeBackward0"),
        ("maximum", lambda w, a, b: tg.maximum(a, b), "MaximumBackward0"),
        ("where", lambda w, a, b: tg.where(a > 0, a, b), "WhereBackward0"),
        ("softmax", lambda w, a, b: tg.softmax(a, 0), "SoftmaxBackward0"),
        ("log_softmax", lambda w, a, b: tg.log_softmax(a, 0), "LogSoftmaxBackward0"),
        ("float", lambda w, a, b: a.float(), "ToCopyBackward0"),
    ]


@pytest.mark.parametrize("name,make,expected", _grad_fn_cases(), ids=[c[0] for c in _grad_fn_cases()])
def test_grad_fn_names(name, make, expected):
    w, a, b = _wab()
    out = make(w, a, b)
    assert out.grad_fn.name() == expected
    assert ("grad_fn=<%s>" % expected) in repr(out)
    assert repr(out.grad_fn).startswith("<%s object at 0x" % expected)


# -- Graph structure ------------------------------------------------------------------
def test_graph_structure():
    x = leaf([1., 2.])
    c = tg.tensor([3., 4.])
    y = (x * c + x).sum()
    s = y.grad_fn
    assert s.name() == "SumBackward0"
    assert repr(s).startswith("<SumBackward0 object at 0x")
    nf = s.next_functions
    assert isinstance(nf, tuple) and len(nf) == 1
    add, k = nf[0]
    assert k == 0 and add.name() == "AddBackward0"
    anf = add.next_functions
    assert len(anf) == 2
    mul, acc = anf[0][0], anf[1][0]
    assert anf[0][1] == 0 and anf[1][1] == 0
    assert mul.name() == "MulBackward0"
    assert type(acc).__name__ == "AccumulateGrad"
    assert repr(acc).startswith("<AccumulateGrad object at 0x")
    mnf = mul.next_functions
    assert len(mnf) == 2
    assert mnf[0][0] is acc and mnf[0][1] == 0
    assert mnf[1] == (None, 0)
    assert acc.variable is x
    assert acc.next_functions == ()


def test_graph_scalar_operand_is_a_slot():
    a = leaf([1., 2.])
    nf = (a * 2).grad_fn.next_functions
    assert len(nf) == 2
    assert type(nf[0][0]).__name__ == "AccumulateGrad" and nf[0][1] == 0
    assert nf[1] == (None, 0)
    w = leaf([1., 2.])
    nf2 = (w ** 2).grad_fn.next_functions
    assert len(nf2) == 1 and type(nf2[0][0]).__name__ == "AccumulateGrad"


def test_graph_same_node_twice():
    a = leaf([1., 2.])
    nf = (a + a).grad_fn.next_functions
    assert len(nf) == 2 and nf[0][0] is nf[1][0]
    s = a * 3
    nf2 = (s * s).grad_fn.next_functions
    assert len(nf2) == 2 and nf2[0][0] is nf2[1][0]
    assert nf2[0][0].name() == "MulBackward0"


def test_graph_saved_tensor_attributes():
    a = leaf([1., 2.])
    b = leaf([3., 4.])
    m = (a * b).grad_fn
    check(m._saved_self, [1., 2.])
    check(m._saved_other, [3., 4.])
    s = (a * b).sum().grad_fn
    assert tuple(s._saved_self_sym_sizes) == (2,)


# =====================================================================================
# 4. Kinks and ties
# =====================================================================================
def test_relu_kink():
    x = leaf([-1., 0., 1.])
    y = tg.relu(x)
    check(y, [0., 0., 1.])
    y.sum().backward()
    check(x.grad, [0., 0., 1.])


def test_clamp_min_kink():
    x = leaf([-1., 0., 1.])
    y = x.clamp(min=0)
    check(y, [0., 0., 1.])
    y.sum().backward()
    check(x.grad, [0., 1., 1.])


def test_abs_kink():
    check(grad_of(lambda x: x.abs(), [-1., 0., 1.]), [-1., 0., 1.])


@pytest.mark.parametrize("fn", ["sign", "floor", "round"])
def test_piecewise_constant_grads_zero(fn):
    check(grad_of(lambda x: getattr(x, fn)(), [-1.5, 0., 0.3, 2.7]), [0., 0., 0., 0.])


@pytest.mark.parametrize("f", [lambda x: x.sqrt(), lambda x: x ** 0.5], ids=["sqrt", "pow_half"])
def test_sqrt_at_zero(f):
    x = leaf([0., 1., 4.])
    y = f(x)
    check(y, [0., 1., 2.])
    y.sum().backward()
    check(x.grad, [np.inf, 0.5, 0.25])


def test_sqrt_negative():
    x = leaf(-1.)
    y = x.sqrt()
    check(y, np.nan)
    y.backward()
    check(x.grad, np.nan)


def test_max_full_ties():
    x = leaf([1., 3., 3.])
    y = x.max()
    check(y, 3.)
    y.backward()
    check(x.grad, [0., 0.5, 0.5])
    x2 = leaf([3., 3., 3.])
    x2.max().backward()
    approx(x2.grad, [1 / 3, 1 / 3, 1 / 3])
    x3 = leaf([1., 3., 3.])
    x3.max().backward(tg.tensor(6.))
    check(x3.grad, [0., 3., 3.])


def test_min_amax_ties_even_split():
    check(grad_of(lambda x: x.min(), [1., 1., 3.]), [0.5, 0.5, 0.])
    check(grad_of(lambda x: x.amax(), [1., 3., 3.]), [0., 0.5, 0.5])
    check(grad_of(lambda x: x.amax(dim=0), [1., 3., 3.]), [0., 0.5, 0.5])


def test_max_dim_ties_first_index():
    x = leaf([1., 3., 3.])
    r = x.max(dim=0)
    check(r.values, 3.)
    assert int(r.indices) == 1
    r.values.backward()
    check(x.grad, [0., 1., 0.])


@pytest.mark.parametrize("keepdim", [False, True])
def test_max_dim1_2d_ties(keepdim):
    x = leaf([[1., 3., 3.], [5., 5., 0.]])
    r = x.max(dim=1, keepdim=keepdim)
    check(r.values, [[3.], [5.]] if keepdim else [3., 5.])
    np.testing.assert_array_equal(r.indices.numpy(), [[1], [0]] if keepdim else [1, 0])
    r.values.sum().backward()
    check(x.grad, [[0., 1., 0.], [1., 0., 0.]])


def test_amax_dim1_2d():
    check(grad_of(lambda x: x.amax(dim=1), [[1., 3., 3.], [5., 5., 0.]]), [[0., .5, .5], [.5, .5, 0.]])


@pytest.mark.parametrize("op", [tg.maximum, tg.max], ids=["maximum", "max_ab"])
def test_maximum_ties(op):
    a = leaf([1., 2., 3.])
    b = leaf([1., 1., 4.])
    op(a, b).sum().backward()
    check(a.grad, [0.5, 1., 0.])
    check(b.grad, [0.5, 0., 1.])


def test_minimum_ties():
    a = leaf([1., 2., 3.])
    b = leaf([1., 1., 4.])
    tg.minimum(a, b).sum().backward()
    check(a.grad, [0.5, 0., 1.])
    check(b.grad, [0.5, 1., 0.])


@pytest.mark.parametrize("bounds", ["scalar", "tensor"])
def test_clamp_0_1_boundaries_inside(bounds):
    x = leaf([-1., 0., .5, 1., 2.])
    if bounds == "scalar":
        y = x.clamp(0, 1)
    else:
        y = x.clamp(tg.tensor(0.), tg.tensor(1.))
    check(y, [0., 0., .5, 1., 1.])
    y.sum().backward()
    check(x.grad, [0., 1., 1., 1., 0.])


def test_clamp_max():
    check(grad_of(lambda x: x.clamp(max=1), [0., 1., 2.]), [1., 1., 0.])


def test_clamp_tensor_bounds_with_rg():
    x = leaf([-1., 0., .5, 1., 2.])
    lo = leaf([0.] * 5)
    hi = leaf([1.] * 5)
    tg.clamp(x, lo, hi).sum().backward()
    check(x.grad, [0., 1., 1., 1., 0.])
    check(lo.grad, [1., 0., 0., 0., 0.])
    check(hi.grad, [0., 0., 0., 0., 1.])


def test_clamp_tensor_bounds_replayed_with_other_inputs():
    # the masks are compared again by each replay (they were the recording's arrays)
    step = tg.compile(lambda x, lo, hi: tg.clamp(x, min=lo, max=hi).sum())
    for xs, los, his in (([-1., 0., .5, 1., 2.], [0.] * 5, [1.] * 5),
                         ([3., 3., -3., .25, 0.], [1.] * 5, [2.] * 5),
                         ([.5, -2., 5., 1.5, 1.], [0., -1., 4., 2., 0.], [1., 0., 6., 3., 2.])):
        x, lo, hi = leaf(xs), leaf(los), leaf(his)
        y = step(x, lo, hi)
        want = np.minimum(np.maximum(xs, los), his)
        assert y.item() == want.sum()
        y.backward()
        inside = (np.array(xs) >= los) & (np.array(xs) <= his)
        check(x.grad, inside.astype(float))
        check(lo.grad, (np.array(xs) < los).astype(float))
        check(hi.grad, (np.array(xs) > his).astype(float))
    assert step.stats.recordings == 1 and step.stats.replays == 2


@pytest.mark.parametrize("f", [lambda x: x ** 0, lambda x: x ** 0.0, lambda x: x ** tg.tensor(0.)],
                         ids=["int0", "float0", "tensor0"])
def test_pow_zero_exponent(f):
    x = leaf([0., 2.])
    y = f(x)
    check(y, [1., 1.])
    y.sum().backward()
    check(x.grad, [0., 0.])


def test_pow_both_rg_zero_exponent():
    x = leaf([0., 2.])
    e = leaf([0., 0.])
    (x ** e).sum().backward()
    check(x.grad, [0., 0.])
    check(e.grad, [0., LN2])


@pytest.mark.parametrize("p,expected", [(1, 1.), (2, 0.), (3, 0.), (1.5, 0.)])
def test_pow_at_zero(p, expected):
    check(grad_of(lambda x: x ** p, 0.), expected)


def test_pow_minus_one_at_zero():
    x = leaf(0.)
    y = x ** -1
    check(y, np.inf)
    y.backward()
    check(x.grad, -np.inf)


@pytest.mark.parametrize("f", [lambda y: tg.tensor(0.) ** y, lambda y: 0.0 ** y, lambda y: tg.pow(0., y)],
                         ids=["tensor_base", "float_base", "pow_fn"])
def test_zero_base_pow(f):
    y = leaf([-1., 0., 1., 2.])
    r = f(y)
    check(r, [np.inf, 1., 0., 0.])
    r.sum().backward()
    check(y.grad, [-np.inf, 0., 0., 0.])


def test_zero_pow_two_both_rg():
    x = leaf(0.)
    e = leaf(2.)
    (x ** e).backward()
    check(x.grad, 0.)
    check(e.grad, 0.)


def test_zero_pow_minus_one_both_rg():
    x = leaf(0.)
    e = leaf(-1.)
    (x ** e).backward()
    check(x.grad, -np.inf)
    check(e.grad, -np.inf)


def test_log_kinks():
    x = leaf([0., 1.])
    y = x.log()
    check(y, [-np.inf, 0.])
    y.sum().backward()
    check(x.grad, [np.inf, 1.])
    x2 = leaf(-1.)
    y2 = x2.log()
    check(y2, np.nan)
    y2.backward()
    check(x2.grad, -1.)


def test_log1p_minus_one():
    x = leaf(-1.)
    y = x.log1p()
    check(y, -np.inf)
    y.backward()
    check(x.grad, np.inf)


def test_reciprocal_at_zero():
    x = leaf(0.)
    y = 1 / x
    check(y, np.inf)
    y.backward()
    check(x.grad, -np.inf)


@pytest.mark.parametrize("d", [0, "tensor"])
def test_divide_by_zero(d):
    x = leaf([1., 0., -1.])
    y = x / (tg.tensor(0.) if d == "tensor" else d)
    check(y, [np.inf, np.nan, -np.inf])
    y.sum().backward()
    check(x.grad, [np.inf, np.inf, np.inf])


def test_divide_by_zero_both_rg():
    x = leaf([1., 0., -1.])
    d = leaf([0., 0., 0.])
    (x / d).sum().backward()
    check(x.grad, [np.inf, np.inf, np.inf])
    check(d.grad, [-np.inf, np.nan, np.inf])


def test_zero_over_zero():
    x = leaf(0.)
    y = 0 / x
    check(y, np.nan)
    y.backward()
    check(x.grad, np.nan)


@pytest.mark.parametrize("p", [0.5, 1.5, -0.5])
def test_negative_base_fractional_exponent(p):
    x = leaf(-4.)
    y = x ** p
    check(y, np.nan)
    y.backward()
    check(x.grad, np.nan)


def test_negative_base_integer_exponent():
    x = leaf(-4.)
    y = x ** 2.0
    check(y, 16.)
    y.backward()
    check(x.grad, -8.)
    x3 = leaf(-2.)
    y3 = x3 ** 3
    check(y3, -8.)
    y3.backward()
    check(x3.grad, 12.)


def test_negative_base_cube_root_both_rg():
    x = leaf(-8.)
    e = leaf(1 / 3)
    y = x ** e
    check(y, np.nan)
    y.backward()
    check(x.grad, np.nan)
    check(e.grad, np.nan)


def test_negative_base_square_both_rg():
    x = leaf(-2.)
    e = leaf(2.)
    (x ** e).backward()
    check(x.grad, -4.)
    check(e.grad, np.nan)


def test_negative_tensor_base_rg_exponent():
    y = leaf([1., 2., 1 / 3])
    r = tg.tensor(-8.) ** y
    check(r, [-8., 64., np.nan])
    r.sum().backward()
    check(y.grad, [np.nan, np.nan, np.nan])


def test_std_of_constant_pair():
    x = leaf([2., 2.])
    y = x.std()
    check(y, 0.)
    y.backward()
    check(x.grad, [0., 0.])


def test_where_sqrt_nan():
    x = leaf(0.)
    y = tg.where(x > 0, x.sqrt(), 0.)
    check(y, 0.)
    y.backward()
    check(x.grad, np.nan)


@pytest.mark.parametrize("fn,expected", [("sigmoid", 0.25), ("tanh", 1.), ("sin", 1.)])
def test_derivatives_at_zero(fn, expected):
    check(grad_of(lambda x: getattr(x, fn)(), 0.), expected)


def test_exp_100():
    check(grad_of(lambda x: x.exp(), 100.), math.exp(100.))
    assert math.isfinite(math.exp(100.))


def test_exp_overflow_grad_inf():
    # exp(1000) overflows; the gradient is inf as in PyTorch's float32 exp(100)
    x = leaf(100., dtype=tg.float32)
    x.exp().backward()
    check(x.grad, np.inf)


# =====================================================================================
# 5. Indexing
# =====================================================================================
def test_index_repeated_accumulates():
    x = leaf([1., 2., 3.])
    y = x[[0, 0, 1]]
    check(y, [1., 1., 2.])
    assert y.grad_fn.name() == "IndexBackward0"
    y.sum().backward()
    check(x.grad, [2., 1., 0.])


def test_index_repeated_weights():
    x = leaf([1., 2., 3.])
    x[[0, 0, 1]].backward(tg.tensor([1., 10., 100.]))
    check(x.grad, [11., 100., 0.])


def test_index_tensor_repeated():
    x = leaf([1., 2., 3.])
    x[tg.tensor([2, 2, 2])].sum().backward()
    check(x.grad, [0., 0., 3.])


def test_index_negative_repeated():
    x = tg.arange(5.).requires_grad_()
    x[[-1, -1, 0]].sum().backward()
    check(x.grad, [1., 0., 0., 0., 2.])


def test_index_2d_rows():
    x = leaf([[1., 2.], [3., 4.]])
    x[[0, 0]].sum().backward()
    check(x.grad, [[2., 2.], [0., 0.]])


def test_index_2d_pairs():
    x = leaf([[1., 2.], [3., 4.]])
    x[[0, 1, 1], [1, 0, 0]].sum().backward()
    check(x.grad, [[0., 1.], [2., 0.]])


def test_bool_mask_scatter():
    x = leaf([1., -2., 3., -4.])
    (x[x > 0] * tg.tensor([10., 100.])).sum().backward()
    check(x.grad, [10., 0., 100., 0.])


def test_row_mask_2d():
    x = leaf([[1., 2.], [3., 4.]])
    x[tg.tensor([True, False])].sum().backward()
    check(x.grad, [[1., 1.], [0., 0.]])


def test_all_false_mask():
    x = leaf([1., 2.])
    y = x[tg.tensor([False, False])]
    assert repr(y) == "tensor([], grad_fn=<IndexBackward0>)"
    y.sum().backward()
    check(x.grad, [0., 0.])


def test_mask_wrong_length():
    x = leaf([1., 2.])
    with raises(IndexError, "The shape of the mask [3] at index 0 does not match the shape of the indexed tensor "
                            "[2] at index 0"):
        x[tg.tensor([True, False, True])]


def test_stepped_slice():
    x = tg.arange(10.).requires_grad_()
    y = x[1:8:3]
    check(y, [1., 4., 7.])
    assert y.grad_fn.name() == "SliceBackward0"
    y.backward(tg.tensor([1., 10., 100.]))
    check(x.grad, [0., 1., 0., 0., 10., 0., 0., 100., 0., 0.])


def test_negative_step_slice():
    x = leaf([1., 2., 3.])
    with raises(ValueError, "step must be greater than zero"):
        x[::-1]


def test_negative_index_and_slice():
    x = tg.arange(5.).requires_grad_()
    x[-1].backward()
    check(x.grad, [0., 0., 0., 0., 1.])
    x2 = tg.arange(5.).requires_grad_()
    (x2[-3:-1] * tg.tensor([1., 10.])).sum().backward()
    check(x2.grad, [0., 0., 1., 10., 0.])


@pytest.mark.parametrize("idx", [5, [5]], ids=["int", "list"])
def test_index_out_of_range(idx):
    x = tg.arange(5.).requires_grad_()
    with raises(IndexError, "index 5 is out of bounds for dimension 0 with size 5"):
        x[idx]


def test_mixed_index():
    x2 = tg.arange(6.).reshape(2, 3).requires_grad_()
    y = x2[1, None, ..., -1]
    check(y, [5.])
    y.sum().backward()
    check(x2.grad, [[0., 0., 0.], [0., 0., 1.]])


def test_setitem_nonleaf():
    x = leaf([1., 2., 3.])
    y = x * 2
    y[0] = 100.
    assert repr(y) == "tensor([100.,   4.,   6.], grad_fn=<CopySlices>)"
    assert y._version == 1
    y.backward(tg.tensor([1., 10., 100.]))
    check(x.grad, [0., 20., 200.])


def test_setitem_with_rg_value():
    x = leaf([1., 2., 3.])
    s = leaf(5.)
    y = x * 2
    y[1] = s * 3
    y.backward(tg.tensor([1., 10., 100.]))
    check(x.grad, [2., 0., 200.])
    check(s.grad, 30.)


def test_setitem_mask():
    x = leaf([0.5, 1., 2.])
    y = x * 2
    y[y > 1.5] = 0.
    y.sum().backward()
    check(x.grad, [2., 0., 0.])


def test_setitem_mask_values():
    x = leaf([1., 2., 3.])
    y = x * 1
    y[y > 1.5] = 0.
    check(y, [1., 0., 0.])
    y.sum().backward()
    check(x.grad, [1., 0., 0.])


def test_setitem_on_saved_exp():
    x = leaf([1., 2.])
    y = x.exp()
    y[0] = 0.
    with raises(RuntimeError, inplace_msg("Exp")):
        y.sum().backward()


def test_setitem_into_constant_buffer():
    x = leaf([1., 2.])
    buf = tg.zeros(3)
    buf[1:] = x * 2
    assert buf.requires_grad is True
    assert buf.is_leaf is False
    assert buf.grad_fn.name() == "CopySlices"
    check(buf, [0., 2., 4.])
    buf.sum().backward()
    check(x.grad, [2., 2.])


def test_inplace_on_view_of_nonleaf():
    x = leaf([1., 2., 3.])
    y = x * 1
    v = y[1:]
    v.mul_(10)
    assert y.grad_fn.name() == "CopySlices"
    assert v.grad_fn.name() == "AsStridedBackward0"
    check(y, [1., 20., 30.])
    y.sum().backward()
    check(x.grad, [1., 10., 10.])


def test_index_put_last_write_wins():
    x = leaf([1., 2., 3.])
    y = x * 1
    y[[0, 0]] = tg.tensor([7., 8.])
    check(y, [8., 2., 3.])


# =====================================================================================
# 6. Broadcasting and reductions
# =====================================================================================
def test_broadcast_sum():
    a = leaf(np.ones((3, 1)))
    b = leaf(np.ones((1, 4)))
    (a + b).sum().backward()
    check(a.grad, [[4.], [4.], [4.]])
    check(b.grad, [[3., 3., 3., 3.]])


def test_broadcast_product():
    a = leaf([[1.], [2.], [3.]])
    b = leaf([[10., 20., 30., 40.]])
    (a * b).sum().backward()
    check(a.grad, [[100.]] * 3)
    check(b.grad, [[6.] * 4])


def test_broadcast_upstream():
    a = leaf(np.ones((3, 1)))
    b = leaf(np.ones((1, 4)))
    (a + b).backward(tg.arange(12.).reshape(3, 4))
    check(a.grad, [[6.], [22.], [38.]])
    check(b.grad, [[12., 15., 18., 21.]])


def test_broadcast_vector_matrix():
    v = leaf([1., 2., 3., 4.])
    M = leaf(np.arange(12.).reshape(3, 4))
    (v * M).sum().backward()
    check(v.grad, [12., 15., 18., 21.])
    check(M.grad, [[1., 2., 3., 4.]] * 3)


def test_broadcast_0d_and_1elem():
    s = leaf(2.)
    (s * tg.tensor([1., 2., 3.])).sum().backward()
    check(s.grad, 6.)
    assert repr(s.grad) == "tensor(6.)"
    o = leaf([2.])
    (o * tg.tensor([1., 2., 3.])).sum().backward()
    check(o.grad, [6.])
    assert repr(o.grad) == "tensor([6.])"


def test_expand_sums_back():
    x = leaf([1., 2.])
    x.expand(3, 2).sum().backward()
    check(x.grad, [3., 3.])


@pytest.mark.parametrize("f,expected", [
    (lambda x: x + 3, 1.), (lambda x: 3 + x, 1.), (lambda x: x - 3, 1.), (lambda x: 3 - x, -1.),
    (lambda x: x * 3, 3.), (lambda x: 3 * x, 3.), (lambda x: x / 4, 0.25), (lambda x: x + True, 1.),
], ids=["x+3", "3+x", "x-3", "3-x", "x*3", "3*x", "x/4", "x+True"])
def test_python_scalars(f, expected):
    x = leaf([1., 2.], dtype=tg.float32)
    y = f(x)
    assert y.dtype == np.float32
    y.sum().backward()
    check(x.grad, [expected, expected], dtype=np.float32)


def test_python_scalar_rdiv_and_rpow():
    x = leaf([1., 2.], dtype=tg.float32)
    y = 4 / x
    assert y.dtype == np.float32
    y.sum().backward()
    check(x.grad, [-4., -1.], dtype=np.float32)
    x2 = leaf([1., 2.], dtype=tg.float32)
    y2 = 2 ** x2
    assert y2.dtype == np.float32
    y2.sum().backward()
    np.testing.assert_allclose(x2.grad.numpy(), [2 * LN2, 4 * LN2], rtol=1e-6)
    assert x2.grad.dtype == np.float32


def test_mixed_dtype_float32_times_float64():
    x = leaf([1., 2.], dtype=tg.float32)
    y = x * tg.tensor([3., 4.], dtype=tg.float64)
    assert y.dtype == np.float64
    y.sum().backward()
    check(x.grad, [3., 4.], dtype=np.float32)


def test_mixed_dtype_float32_times_int64():
    x = leaf([1., 2.], dtype=tg.float32)
    y = x * tg.tensor([3, 4])
    assert y.dtype == np.float32
    y.sum().backward()
    check(x.grad, [3., 4.], dtype=np.float32)


def _r():
    return tg.arange(6.).reshape(2, 3).requires_grad_()


def test_reduction_sum0():
    x = _r()
    x.sum(0).backward(tg.tensor([1., 2., 3.]))
    check(x.grad, [[1., 2., 3.], [1., 2., 3.]])


@pytest.mark.parametrize("f,up", [
    (lambda x: x.sum(1), [1., 2.]),
    (lambda x: x.sum(1, keepdim=True), [[1.], [2.]]),
    (lambda x: x.sum(-1), [1., 2.]),
], ids=["sum1", "sum1_keepdim", "sum-1"])
def test_reduction_sum1(f, up):
    x = _r()
    f(x).backward(tg.tensor(up))
    check(x.grad, [[1., 1., 1.], [2., 2., 2.]])


def test_reduction_mean():
    x = _r()
    x.mean().backward()
    approx(x.grad, [[1 / 6] * 3] * 2)


def test_reduction_mean0():
    x = _r()
    x.mean(0).backward(tg.tensor([1., 2., 3.]))
    check(x.grad, [[.5, 1., 1.5], [.5, 1., 1.5]])


def test_reduction_mean1_keepdim():
    x = _r()
    x.mean(1, keepdim=True).backward(tg.tensor([[1.], [2.]]))
    approx(x.grad, [[1 / 3] * 3, [2 / 3] * 3])


def test_reduction_prod1():
    x = _r()
    x.prod(1).backward(tg.tensor([1., 2.]))
    check(x.grad, [[2., 0., 0.], [40., 30., 24.]])


def test_reduction_var1():
    x = _r()
    x.var(1).backward(tg.tensor([1., 2.]))
    approx(x.grad, [[-1., 0., 1.], [-2., 0., 2.]])


def test_reduction_max1_values():
    x = _r()
    x.max(1).values.backward(tg.tensor([1., 2.]))
    check(x.grad, [[0., 0., 1.], [0., 0., 2.]])


def test_reduction_dim_out_of_range():
    x = _r()
    with raises(IndexError, "Dimension out of range (expected to be in range of [-2, 1], but got 2)"):
        x.sum(2)


def test_prod_with_zeros():
    check(grad_of(lambda x: x.prod(), [0., 2., 3.]), [6., 0., 0.])
    check(grad_of(lambda x: x.prod(), [0., 2., 0.]), [0., 0., 0.])


def test_empty_mean_and_sum():
    x = leaf(np.zeros(0))
    m = x.mean()
    assert repr(m) == "tensor(nan, grad_fn=<MeanBackward0>)"
    m.backward()
    assert repr(x.grad) == "tensor([])"
    assert x.grad.shape == (0,)
    x2 = leaf(np.zeros(0))
    s = x2.sum()
    check(s, 0.)
    s.backward()
    assert x2.grad.shape == (0,)


def test_batched_matmul_grad():
    A = leaf(np.ones((2, 3, 4)))
    B = leaf(np.ones((4, 5)))
    (A @ B).sum().backward()
    check(B.grad, np.full((4, 5), 6.))
    check(A.grad, np.full((2, 3, 4), 5.))


# =====================================================================================
# Seed examples
# =====================================================================================
def _seed():
    w = leaf([[1., 2.]])
    x = tg.tensor([[1., 1.], [2., 2.]])
    return w, tg.mm(w, x)


def test_seed_numel_one():
    w = leaf([[1., 2.]])
    loss = tg.mm(w, tg.tensor([[1.], [1.]]))
    assert repr(loss) == "tensor([[3.]], grad_fn=<MmBackward0>)"
    loss.backward()
    assert repr(w.grad) == "tensor([[1., 1.]])"


def test_seed_loss_repr_and_implicit_error():
    w, loss = _seed()
    assert repr(loss) == "tensor([[5., 5.]], grad_fn=<MmBackward0>)"
    with raises(RuntimeError, SCALAR_MSG):
        loss.backward()
    assert w.grad is None


def test_seed_ones_like():
    w, loss = _seed()
    loss.backward(tg.ones_like(loss))
    assert repr(w.grad) == "tensor([[2., 4.]])"


def test_seed_sum_retained():
    w, loss = _seed()
    loss.sum().backward(retain_graph=True)
    assert repr(w.grad) == "tensor([[2., 4.]])"


def test_seed_select():
    w, loss = _seed()
    e = loss[0][0]
    assert repr(e) == "tensor(5., grad_fn=<SelectBackward0>)"
    e.backward(retain_graph=True)
    assert repr(w.grad) == "tensor([[1., 2.]])"
    w.grad = None
    loss[0][1].backward(retain_graph=True)
    assert repr(w.grad) == "tensor([[1., 2.]])"


def test_seed_both_selects_without_reset():
    w, loss = _seed()
    loss[0][0].backward(retain_graph=True)
    loss[0][1].backward(retain_graph=True)
    assert repr(w.grad) == "tensor([[2., 4.]])"


def test_seed_all_four_in_sequence():
    w, loss = _seed()
    seq = []
    loss.backward(tg.ones_like(loss), retain_graph=True)
    seq.append(vals(w.grad).tolist())
    loss.sum().backward(retain_graph=True)
    seq.append(vals(w.grad).tolist())
    loss[0][0].backward(retain_graph=True)
    seq.append(vals(w.grad).tolist())
    loss[0][1].backward(retain_graph=True)
    seq.append(vals(w.grad).tolist())
    assert seq == [[[2., 4.]], [[4., 8.]], [[5., 10.]], [[6., 12.]]]


def test_seed_pitfall_ones_like_then_sum():
    w, loss = _seed()
    loss.backward(tg.ones_like(loss))
    with raises(RuntimeError, SECOND_MSG):
        loss.sum().backward(retain_graph=True)


def test_seed_pitfall_two_selects_without_retain():
    w, loss = _seed()
    loss[0][0].backward()
    with raises(RuntimeError, SECOND_MSG):
        loss[0][1].backward()
