"""Indexing as PyTorch does it, with literal expected values (no PyTorch needed;
where it is installed each case is also compared with it).

PyTorch applies integer indices as plain selects first, so an integer is never an
advanced index: the broadcast dimensions of the index tensors stay in place when
those tensors are adjacent (NumPy would count the integer and move them to the
front).  Sequences inside an index are index tensors."""
import re
import warnings

import numpy as np
import pytest

import tapegrad as tg


def raises(exc, msg):
    return pytest.raises(exc, match="^" + re.escape(msg) + "$")


def x18(requires_grad=False):
    return tg.tensor(np.arange(18.).reshape(2, 3, 3), requires_grad=requires_grad)


def values(t):
    return t.detach().numpy()


# (name, shape of x = arange(n).reshape(shape), index as a function of the library, expected value)
CASES = [
    ("int_slice_tensor", (2, 3, 3), lambda lib: (0, slice(None), lib.tensor([0, 1, 2])),
     [[0, 1, 2], [3, 4, 5], [6, 7, 8]]),
    ("negative_int_slice_list", (2, 3, 3), lambda lib: (-1, slice(None), [-1, 0]),
     [[11, 9], [14, 12], [17, 15]]),
    ("tuple_in_tuple", (2, 3, 3), lambda lib: ((0,),), [[[0, 1, 2], [3, 4, 5], [6, 7, 8]]]),
    ("ints_then_tuple_then_ellipsis", (2, 3, 4, 5), lambda lib: (1, 2, 3, (1, 2, 3), Ellipsis), [116, 117, 118]),
    ("list_of_lists_is_a_tuple", (2, 3, 3), lambda lib: [[0, 1], [1, 0]], [[3, 4, 5], [9, 10, 11]]),
    ("nested_list_as_one_index", (2, 3), lambda lib: ([[0, 1], [1, 0]],),
     [[[0, 1, 2], [3, 4, 5]], [[3, 4, 5], [0, 1, 2]]]),
    ("list_with_int_and_list_is_a_tuple", (2, 3), lambda lib: [1, [2, 0]], [5, 3]),
    ("python_true", (2,), lambda lib: True, [[0, 1]]),
    ("python_false", (2,), lambda lib: False, np.zeros((0, 2))),
    ("true_inside", (2, 2), lambda lib: (slice(None), True, [1, 0]), [[1, 0], [3, 2]]),
    ("bool_0d_tensor", (2,), lambda lib: lib.tensor(True), [[0, 1]]),
    ("int_0d_tensor", (2, 3), lambda lib: lib.tensor(1), [3, 4, 5]),
    ("empty_list", (2, 3), lambda lib: [], np.zeros((0, 3))),
    ("empty_list_second", (2, 3), lambda lib: (slice(None), []), np.zeros((2, 0))),
    ("stepped_slices_and_list", (2, 3, 3), lambda lib: (slice(0, 2, 2), [0, 2], slice(None, None, 2)),
     [[[0, 2], [6, 8]]]),
    ("none_between_tensors", (2, 3, 3), lambda lib: ([0, 1], None, [0, 1]), [[[0, 1, 2]], [[12, 13, 14]]]),
    ("ellipsis_tensor_int", (2, 3, 3), lambda lib: (Ellipsis, [0, 1], 0), [[0, 3], [9, 12]]),
    ("tensor_int_tensor", (2, 3, 3), lambda lib: ([0, 1], 0, [2, 1]), [2, 10]),
    ("mask_then_int", (2, 3), lambda lib: (lib.tensor([False, True]), 2), [5]),
    ("int_then_mask", (2, 3), lambda lib: (1, lib.tensor([True, False, True])), [3, 5]),
    ("float_list_truncated", (3,), lambda lib: [[1.7, -1.7]], [1, 2]),
    ("bool_list_is_a_mask", (3,), lambda lib: [True, False, True], [0, 2]),
    ("int32_tensor", (3,), lambda lib: lib.tensor(np.array([2, 0], np.int32)), [2, 0]),
]


@pytest.mark.parametrize("name, shape, index, expected", CASES, ids=[c[0] for c in CASES])
def test_index_values(name, shape, index, expected):
    x = tg.arange(float(np.prod(shape))).reshape(shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (a list read as a tuple: PyTorch's warning, below)
        got = x[index(tg)]
    np.testing.assert_array_equal(values(got), np.asarray(expected, np.float64))


def test_list_read_as_a_tuple_warns_as_pytorch():
    with pytest.warns(UserWarning, match=re.escape("Using a non-tuple sequence for multidimensional indexing is "
                                                   "deprecated and will be changed in pytorch 2.9; use x[tuple(seq)] "
                                                   "instead of x[seq].")):
        tg.zeros(2, 3)[[[0, 1], [1, 0]]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # a list of numbers is one index tensor: no warning
        tg.zeros(2, 3)[[0, 1]]


@pytest.mark.parametrize("name, shape, index, expected", CASES, ids=[c[0] for c in CASES])
def test_index_values_match_torch(name, shape, index, expected):
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (PyTorch warns of a list read as a tuple)
        got = torch.arange(float(np.prod(shape)), dtype=torch.float64).reshape(shape)[index(torch)]
    np.testing.assert_array_equal(got.numpy(), np.asarray(expected, np.float64))


def test_issue_reproducer_value_and_shape():
    x = x18()
    np.testing.assert_array_equal(values(x[0, :, tg.tensor([0, 1, 2])]), [[0, 1, 2], [3, 4, 5], [6, 7, 8]])
    assert tg.zeros(2, 3, 4)[0, :, tg.tensor([0, 1])].shape == (3, 2)
    assert tg.zeros(2, 3, 4)[0, :, [0, 1]].shape == (3, 2)
    assert tg.zeros(2, 3, 4, 5)[:, 0, :, [0, 1]].shape == (2, 4, 2)   # in place among the tensors
    assert tg.zeros(2, 3, 4, 5)[[0, 1], :, 0, [0, 1]].shape == (2, 3)  # apart: the broadcast dims in front


def test_gradient_follows_the_forward():
    x = x18(requires_grad=True)
    y = x[0, :, tg.tensor([0, 1, 2])]
    assert y.grad_fn.name() == "IndexBackward0"
    w = np.arange(1., 10.).reshape(3, 3)
    (y * tg.tensor(w)).sum().backward()
    expected = np.zeros((2, 3, 3))
    expected[0] = w         # y[i, j] = x[0, i, j]
    np.testing.assert_array_equal(values(x.grad), expected)


def test_repeated_indices_accumulate():
    x = tg.tensor(np.arange(6.).reshape(2, 3), requires_grad=True)
    y = x[1, [0, 0, 2]]
    np.testing.assert_array_equal(values(y), [3, 3, 5])
    (y * tg.tensor([1., 10., 100.])).sum().backward()
    np.testing.assert_array_equal(values(x.grad), [[0, 0, 0], [11, 0, 100]])


def test_gradcheck_int_slice_tensor():
    x = tg.tensor(np.random.default_rng(0).standard_normal((2, 3, 4)), requires_grad=True)
    assert tg.autograd.gradcheck(lambda x: x[1, :, tg.tensor([3, 0, 3])], (x,))
    assert tg.autograd.gradcheck(lambda x: x[[1, 0], 1:, None, [2, 2]], (x,))


def test_setitem_int_slice_tensor():
    x = x18(requires_grad=True)
    v = tg.tensor([[-1., -2.], [-3., -4.], [-5., -6.]], requires_grad=True)
    y = x * 1
    y[0, :, tg.tensor([0, 1])] = v
    assert y.grad_fn.name() == "CopySlices"     # (index_put_ on the select: PyTorch's name)
    np.testing.assert_array_equal(values(y[0]), [[-1, -2, 2], [-3, -4, 5], [-5, -6, 8]])
    np.testing.assert_array_equal(values(y[1]), np.arange(9., 18.).reshape(3, 3))
    w = np.arange(18.).reshape(2, 3, 3) + 1
    (y * tg.tensor(w)).sum().backward()
    np.testing.assert_array_equal(values(v.grad), [[1, 2], [4, 5], [7, 8]])
    gx = w.copy()
    gx[0, :, :2] = 0
    np.testing.assert_array_equal(values(x.grad), gx)


def test_setitem_tensors_only_is_index_put():
    y = tg.zeros(3, requires_grad=True) * 1
    y[[0, 2]] = 5.
    assert y.grad_fn.name() == "IndexPutBackward0"
    np.testing.assert_array_equal(values(y), [5, 0, 5])


def test_inplace_add_through_index():
    x = x18(requires_grad=True)
    y = x * 1
    y[1, :, [2, 0]] += tg.tensor([10., 20.])
    np.testing.assert_array_equal(values(y[1]), [[29, 10, 21], [32, 13, 24], [35, 16, 27]])
    y.sum().backward()
    np.testing.assert_array_equal(values(x.grad), np.ones((2, 3, 3)))


def test_setitem_false_does_nothing_and_true_writes():
    y = tg.zeros(2)
    y[False] = tg.ones(7)       # PyTorch: nothing happens, whatever the value
    np.testing.assert_array_equal(values(y), [0, 0])
    y[True] = tg.tensor([1., 2.])
    np.testing.assert_array_equal(values(y), [1, 2])


def test_setitem_leading_ones_of_the_value_dropped():
    y = tg.zeros(2, 3)
    y[:, [0, 2]] = tg.ones(1, 1, 2, 2)
    np.testing.assert_array_equal(values(y), [[1, 0, 1], [1, 0, 1]])
    y[0] = tg.full((1, 1, 3), 4.)
    np.testing.assert_array_equal(values(y[0]), [4, 4, 4])


@pytest.mark.parametrize("index, exc, msg", [
    (lambda: (0, slice(None), [0, 5]), IndexError, "index 5 is out of bounds for dimension 0 with size 3"),
    (lambda: ([0, 1], slice(None), [0, 5]), IndexError, "index 5 is out of bounds for dimension 1 with size 3"),
    (lambda: (slice(None), 5), IndexError, "index 5 is out of bounds for dimension 1 with size 3"),
    (lambda: (None, -3), IndexError, "index -3 is out of bounds for dimension 1 with size 2"),
    (lambda: ([5, 0], [0, 7]), IndexError, "index 5 is out of bounds for dimension 0 with size 2"),
    (lambda: ([0, 5], [7, 0]), IndexError, "index 7 is out of bounds for dimension 1 with size 3"),
    (lambda: ([0, 1], [0, 1, 2]), IndexError,
     "shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]"),
    (lambda: (0, tg.tensor([True, False])), IndexError,
     "The shape of the mask [2] at index 0 does not match the shape of the indexed tensor [3, 3] at index 0"),
    (lambda: tg.tensor([0.5]), IndexError, "tensors used as indices must be long, int, byte or bool tensors"),
    (lambda: 1.5, IndexError, "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                              "valid indices (got float)"),
    (lambda: np.bool_(True), IndexError, "only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                                         "Variables are valid indices (got numpy.bool)"),
    (lambda: (0, 0, 0, 0), IndexError, "too many indices for tensor of dimension 3"),
    (lambda: (slice(None, None, -1),), ValueError, "step must be greater than zero"),
    (lambda: ["a"], TypeError, "new(): invalid data type 'str'"),
], ids=["tensor_after_int", "second_tensor", "int", "int_after_none", "first_element_first", "then_first_tensor",
        "broadcast", "mask_after_int", "float_tensor", "float", "numpy_bool", "too_many", "negative_step", "str"])
def test_index_errors(index, exc, msg):
    with raises(exc, msg):
        x18()[index()]


def test_empty_results_read_no_index():
    z = tg.zeros(0, 3)
    assert z[:, [3]].shape == (0, 1)        # no element: no index checked (PyTorch)
    assert x18()[[5], []].shape == (0, 3)
    with raises(IndexError, "index is out of bounds for dimension with size 0"):
        z[[0]]


def test_zero_dim_tensor_indices():
    s = tg.tensor(2.)
    assert s[None].shape == (1,) and s[...].shape == () and s[True].shape == (1,) and s[False].shape == (0,)
    assert s[tg.tensor(True)].shape == (1,)
    with raises(IndexError, "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` "
                            "in C++ to convert a 0-dim tensor to a number"):
        s[0]
    with raises(IndexError, "too many indices for tensor of dimension 0"):
        s[0, ]
    with raises(IndexError, "too many indices for tensor of dimension 0"):
        s[tg.tensor(0)]


def test_basic_index_names():
    x = x18(requires_grad=True)
    assert x[0, 1:].grad_fn.name() == "SliceBackward0"
    assert x[1:, 0].grad_fn.name() == "SelectBackward0"
    assert x[0, None].grad_fn.name() == "UnsqueezeBackward0"
    assert x[:, ::1].grad_fn.name() == "AliasBackward0"
    assert x[:].grad_fn.name() == "SliceBackward0"


def test_replay_integer_argument_after_a_select():
    """An integer argument indexing after an integer stays live in a replay."""
    cf = tg.compile(lambda x, i: (x[1, :, i] * tg.tensor([[1., 10.]])).sum())
    x = x18(requires_grad=True)
    assert cf(x, tg.tensor([0, 2])).item() == 9 + 10 * 11 + 12 + 10 * 14 + 15 + 10 * 17
    y = cf(x, tg.tensor([2, 2]))
    assert y.item() == 11 * 11 + 14 * 11 + 17 * 11
    x.grad = None
    y.backward()
    expected = np.zeros((2, 3, 3))
    expected[1, :, 2] = 11
    np.testing.assert_array_equal(values(x.grad), expected)
    assert cf.stats.recordings == 1 and cf.stats.replays == 1
