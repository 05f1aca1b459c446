"""einsum, tensordot, cross, repeat_interleave, F.pad (constant, reflect, replicate,
circular), contiguous, view_as, reshape_as, expand_as, flatten/unflatten and
nn.Flatten/nn.Unflatten: compositions of recorded views, sums, products, matrix
products, gathers and setitems.  Each is checked against literal values, against
PyTorch (values, gradients, errors) where torch is installed, by gradcheck and
gradgradcheck, through the compiled and the interpreted reverse, and in a
tg.compile / tg.record replay."""
import warnings

import numpy as np
import pytest

import tapegrad as tg

from case_tables import shape_tests, case_inputs, leaves


def _pad(m, *a, **k):
    return m.nn.functional.pad(*a, **k)


# name -> (f(module, *inputs), input shapes): each f runs unchanged on tapegrad and on torch
CASES = {
    # einsum
    "einsum_matmul": (lambda m, a, b: m.einsum("ij,jk->ik", a, b), [(2, 3), (3, 4)]),
    "einsum_implicit": (lambda m, a, b: m.einsum("ij,jk", a, b), [(2, 3), (3, 4)]),
    "einsum_list": (lambda m, a, b: m.einsum("ij,jk->ik", [a, b]), [(2, 3), (3, 4)]),
    "einsum_bmm": (lambda m, a, b: m.einsum("bij,bjk->bik", a, b), [(2, 3, 4), (2, 4, 5)]),
    "einsum_trace": (lambda m, a: m.einsum("ii", a), [(3, 3)]),
    "einsum_diagonal": (lambda m, a: m.einsum("ii->i", a), [(3, 3)]),
    "einsum_diag_3d": (lambda m, a: m.einsum("iji->ji", a), [(3, 2, 3)]),
    "einsum_outer": (lambda m, u, v: m.einsum("i,j->ij", u, v), [(3,), (4,)]),
    "einsum_dot": (lambda m, u, v: m.einsum("i,i->", u, v), [(3,), (3,)]),
    "einsum_hadamard": (lambda m, a, b: m.einsum("ij,ij->ij", a, b), [(2, 3), (2, 3)]),
    "einsum_three": (lambda m, a, b, c: m.einsum("ij,jk,kl->il", a, b, c), [(2, 3), (3, 4), (4, 5)]),
    "einsum_four": (lambda m, a, b, c, d: m.einsum("ab,bc,cd,de->ae", a, b, c, d),
                    [(2, 3), (3, 2), (2, 4), (4, 2)]),
    "einsum_bilinear": (lambda m, l, A, r: m.einsum("bn,anm,bm->ba", l, A, r), [(2, 5), (3, 5, 4), (2, 4)]),
    "einsum_ellipsis": (lambda m, a, b: m.einsum("...ij,...jk", a, b), [(2, 3, 4), (2, 4, 5)]),
    "einsum_ellipsis_broadcast": (lambda m, a, b: m.einsum("...ij,...jk->...ik", a, b), [(2, 1, 3, 4), (3, 4, 2)]),
    "einsum_ellipsis_summed": (lambda m, a: m.einsum("...ij->ij", a), [(4, 2, 3)]),
    "einsum_ellipsis_middle": (lambda m, a: m.einsum("i...j->j...i", a), [(2, 3, 4, 5)]),
    "einsum_sum": (lambda m, a: m.einsum("ij->", a), [(2, 3)]),
    "einsum_sum_rows": (lambda m, a: m.einsum("ij->i", a), [(2, 3)]),
    "einsum_transpose": (lambda m, a: m.einsum("ij->ji", a), [(2, 3)]),
    "einsum_identity": (lambda m, a: m.einsum("ij", a), [(2, 3)]),
    "einsum_broadcast_size1": (lambda m, a, b: m.einsum("ij,jk->ik", a, b), [(2, 1), (3, 4)]),
    "einsum_broadcast_batch": (lambda m, a, b: m.einsum("bij,bjk->bik", a, b), [(1, 2, 3), (4, 3, 2)]),
    "einsum_broadcast_mul": (lambda m, a, b: m.einsum("i,i->i", a, b), [(3,), (1,)]),
    "einsum_upper_lower": (lambda m, a, b: m.einsum("Ab,bA", a, b), [(2, 3), (3, 2)]),
    "einsum_implicit_order": (lambda m, a, b: m.einsum("bA,a", a, b), [(2, 3), (2,)]),
    "einsum_spaces": (lambda m, a, b: m.einsum(" i j , j k -> k i ", a, b), [(2, 3), (3, 4)]),
    "einsum_sublist": (lambda m, a, b: m.einsum(a, [0, 1], b, [1, 2], [0, 2]), [(2, 3), (3, 4)]),
    "einsum_sublist_ellipsis": (lambda m, a: m.einsum(a, [Ellipsis, 0], [Ellipsis]), [(2, 3, 4)]),
    "einsum_scalar_operand": (lambda m, s, a: m.einsum(",ij->ij", s, a), [(), (2, 3)]),
    "einsum_repeated_three_ops": (lambda m, a, b, c: m.einsum("ij,ij,ij->i", a, b, c), [(2, 3), (2, 3), (2, 3)]),
    "einsum_trace_of_product": (lambda m, a, b: m.einsum("ij,ji", a, b), [(3, 4), (4, 3)]),
    "einsum_batch_diag": (lambda m, a, b: m.einsum("bii,bi->b", a, b), [(2, 3, 3), (2, 3)]),
    "einsum_summed_alone": (lambda m, a, b: m.einsum("ijk,jl->il", a, b), [(2, 3, 4), (3, 5)]),
    # tensordot
    "tensordot_2": (lambda m, a, b: m.tensordot(a, b), [(2, 3, 4), (3, 4, 5)]),
    "tensordot_1": (lambda m, a, b: m.tensordot(a, b, 1), [(2, 3, 4), (4, 5)]),
    "tensordot_0": (lambda m, a, b: m.tensordot(a, b, dims=0), [(2, 3), (4,)]),
    "tensordot_lists": (lambda m, a, b: m.tensordot(a, b, ([1, 0], [0, 2])), [(3, 4, 2), (4, 5, 3)]),
    "tensordot_pair": (lambda m, a, b: m.tensordot(a, b, dims=([2], [1])), [(2, 3, 4), (5, 4)]),
    "tensordot_size1": (lambda m, a, b: m.tensordot(a, b, ([1], [0])), [(2, 1), (3, 4)]),
    # cross
    "cross": (lambda m, a, b: m.cross(a, b, dim=1), [(4, 3), (4, 3)]),
    "cross_dim0": (lambda m, a, b: m.cross(a, b, 0), [(3, 2), (3, 2)]),
    "cross_negative": (lambda m, a, b: a.cross(b, dim=-1), [(2, 2, 3), (2, 2, 3)]),
    "cross_broadcast": (lambda m, a, b: m.cross(a, b, dim=1), [(1, 3), (4, 3)]),
    # repeat_interleave
    "repeat_interleave_int": (lambda m, x: m.repeat_interleave(x, 2), [(2, 3)]),
    "repeat_interleave_dim": (lambda m, x: m.repeat_interleave(x, 3, dim=1), [(2, 3)]),
    "repeat_interleave_tensor": (lambda m, x: m.repeat_interleave(x, m.tensor([1, 0, 2]), dim=1), [(2, 3)]),
    "repeat_interleave_one": (lambda m, x: x.repeat_interleave(m.tensor([2]), dim=0), [(2, 3)]),
    "repeat_interleave_0d_repeats": (lambda m, x: x.repeat_interleave(m.tensor(2), 0, output_size=4), [(2, 3)]),
    "repeat_interleave_scalar": (lambda m, x: m.repeat_interleave(x, 3), [()]),
    # pad
    "pad_constant": (lambda m, x: _pad(m, x, (1, 2)), [(2, 3)]),
    "pad_constant_value": (lambda m, x: _pad(m, x, (1, 0, 2, 1), value=2.5), [(2, 3)]),
    "pad_constant_crop": (lambda m, x: _pad(m, x, (-1, 2, 0, -1)), [(2, 3)]),
    "pad_constant_3d": (lambda m, x: _pad(m, x, (1, 1, 0, 0, 2, 1), "constant", -1.0), [(2, 3, 2)]),
    "pad_constant_empty": (lambda m, x: _pad(m, x, ()), [(2, 3)]),
    "pad_reflect_1d": (lambda m, x: _pad(m, x, (2, 1), mode="reflect"), [(2, 4)]),
    "pad_reflect_1d_batch": (lambda m, x: _pad(m, x, (3, 2), mode="reflect"), [(2, 3, 4)]),
    "pad_reflect_2d": (lambda m, x: _pad(m, x, (1, 2, 2, 1), mode="reflect"), [(2, 3, 4)]),
    "pad_reflect_3d": (lambda m, x: _pad(m, x, (1, 0, 1, 1, 0, 1), mode="reflect"), [(1, 2, 2, 3, 2)]),
    "pad_reflect_negative": (lambda m, x: _pad(m, x, (-1, 2), mode="reflect"), [(2, 4)]),
    "pad_replicate_1d": (lambda m, x: _pad(m, x, (5, 2), mode="replicate"), [(2, 3)]),
    "pad_replicate_2d": (lambda m, x: _pad(m, x, (1, 3, 2, 0), mode="replicate"), [(1, 2, 3, 2)]),
    "pad_replicate_3d": (lambda m, x: _pad(m, x, (1, 1, 2, 0, 0, 1), mode="replicate"), [(2, 2, 3, 2)]),
    "pad_replicate_negative": (lambda m, x: _pad(m, x, (-1, 1), mode="replicate"), [(2, 3)]),
    "pad_circular_1d": (lambda m, x: _pad(m, x, (2, 3), mode="circular"), [(2, 4)]),
    "pad_circular_2d": (lambda m, x: _pad(m, x, (1, 2, 2, 1), mode="circular"), [(1, 2, 3, 4)]),
    "pad_circular_3d": (lambda m, x: _pad(m, x, (1, 1, 0, 2, 1, 0), mode="circular"), [(2, 2, 3, 2)]),
    "pad_circular_negative": (lambda m, x: _pad(m, x, (-1, 2), mode="circular"), [(2, 4)]),
    "pad_circular_negative_right": (lambda m, x: _pad(m, x, (3, -2, 0, 0), mode="circular"), [(1, 2, 5)]),
    "pad_reflect_zero_value": (lambda m, x: _pad(m, x, (1, 1), mode="reflect", value=0.0), [(2, 3)]),
    # views and flattening
    "contiguous_view": (lambda m, x: x.t().contiguous(), [(2, 3)]),
    "view_as": (lambda m, x, y: x.view_as(y), [(2, 3), (3, 2)]),
    "reshape_as": (lambda m, x, y: x.t().reshape_as(y), [(2, 3), (6,)]),
    "expand_as": (lambda m, x, y: x.expand_as(y), [(1, 3), (2, 3)]),
    "flatten_dims": (lambda m, x: m.flatten(x, 1, 2), [(2, 3, 4, 2)]),
    "flatten_method": (lambda m, x: x.flatten(start_dim=-2), [(2, 3, 4)]),
    "unflatten": (lambda m, x: m.unflatten(x, 1, (2, 3)), [(2, 6)]),
    "unflatten_inferred": (lambda m, x: x.unflatten(-1, (-1, 2)), [(2, 6)]),
    "nn_flatten": (lambda m, x: m.nn.Flatten()(x), [(2, 3, 4)]),
    "nn_unflatten": (lambda m, x: m.nn.Unflatten(1, (3, 4))(x), [(2, 12)]),
}


test_gradcheck, test_gradgradcheck, test_matches_torch, test_float32_matches_torch = shape_tests(CASES, value_atol=1e-14, float32_tol=1e-5)


@pytest.mark.parametrize("name", ["pad_constant", "pad_reflect_1d", "pad_reflect_2d", "pad_reflect_3d",
                                  "pad_replicate_1d", "pad_replicate_2d", "pad_replicate_3d", "contiguous_view",
                                  "view_as", "unflatten", "flatten_dims", "repeat_interleave_tensor"])
def test_grad_fn_names_match_torch(name):
    torch = pytest.importorskip("torch")
    f = CASES[name][0]
    values = case_inputs(CASES, name)
    o = f(tg, *leaves(values))
    t = f(torch, *[torch.tensor(v, requires_grad=True) for v in values])
    assert o.grad_fn.name() == type(t.grad_fn).__name__


# -- literal values -----------------------------------------------------------------------
def _ar(*shape):
    return tg.arange(float(np.prod(shape))).reshape(*shape)


def test_einsum_values():
    a, b = _ar(2, 3), _ar(3, 2)
    assert tg.einsum("ij,jk->ik", a, b).tolist() == [[10.0, 13.0], [28.0, 40.0]]
    assert tg.einsum("ij,jk", [a, b]).tolist() == [[10.0, 13.0], [28.0, 40.0]]
    m = _ar(3, 3)
    assert tg.einsum("ii", m).item() == 12.0
    assert tg.einsum("ii->i", m).tolist() == [0.0, 4.0, 8.0]
    assert tg.einsum("ij->ji", a).tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert tg.einsum("ij->", a).item() == 15.0
    assert tg.einsum("ij->j", a).tolist() == [3.0, 5.0, 7.0]
    assert tg.einsum("i,j->ij", tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0, 5.0])).tolist() == [
        [3.0, 4.0, 5.0], [6.0, 8.0, 10.0]]
    assert tg.einsum("ij,jk,kl->il", a, b, tg.eye(2)).tolist() == [[10.0, 13.0], [28.0, 40.0]]
    assert tg.einsum("...ij->...ji", _ar(2, 1, 2)).tolist() == [[[0.0], [1.0]], [[2.0], [3.0]]]
    assert tg.einsum("bA,a", tg.ones(2, 3), tg.ones(2)).shape == (3, 2, 2)    # (A before a before b)
    assert tg.einsum(a, [0, 1], [1]).tolist() == [3.0, 5.0, 7.0]
    assert tg.einsum("ij->", tg.ones(2, 3, dtype=tg.int32)).dtype == tg.int64     # (a sum, as PyTorch's)
    assert tg.einsum("ij,jk", tg.ones(2, 3, dtype=tg.int32), tg.ones(3, 2, dtype=tg.int32)).tolist() == [[3, 3]] * 2
    assert tg.einsum("i,i->i", tg.ones(3), tg.ones(3, dtype=tg.float32)).dtype == tg.float64   # (a product promotes)
    assert tg.einsum("ij,jk->ik", tg.ones(2, 0), tg.ones(0, 4)).tolist() == [[0.0] * 4] * 2


def test_einsum_view_and_new_tensor():
    x = _ar(2, 3).requires_grad_()
    y = tg.einsum("ij", x)
    assert y is not x and np.may_share_memory(y._data, x._data)
    assert np.may_share_memory(tg.einsum("ij->ji", x)._data, x._data)


def test_einsum_uses_the_path_of_numpy():
    # a chain whose left-to-right order is the expensive one: einsum_path contracts b, c first
    from tapegrad.ops import compose
    a, b, c = tg.ones(10, 2), tg.ones(2, 10), tg.ones(10, 1)
    terms = [(a, [0, 1]), (b, [1, 2]), (c, [2, 3])]
    assert compose._path(terms, [0, 3], {0: 10, 1: 2, 2: 10, 3: 1}) == [(1, 2), (0, 1)]
    assert tg.einsum("ij,jk,kl->il", a, b, c).tolist() == [[20.0]] * 10


def test_tensordot_cross_values():
    a, b = _ar(2, 3), _ar(3, 2)
    assert tg.tensordot(a, b, 1).tolist() == [[10.0, 13.0], [28.0, 40.0]]
    assert tg.tensordot(a, a, 2).item() == 55.0
    assert tg.tensordot(a, b, ([0, 1], [1, 0])).item() == 50.0
    assert tg.tensordot(a, b, [[1], [0]]).tolist() == [[10.0, 13.0], [28.0, 40.0]]
    assert tg.tensordot(a, b, tg.tensor(1)).tolist() == [[10.0, 13.0], [28.0, 40.0]]
    assert tg.tensordot(tg.ones(2), tg.ones(3), 0).shape == (2, 3)
    e = tg.eye(3)
    assert tg.cross(e[0], e[1], dim=0).tolist() == [0.0, 0.0, 1.0]
    assert tg.cross(e, e.roll(-1, 0), dim=1).tolist() == [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    assert tg.tensor([1.0, 2.0, 3.0]).cross(tg.tensor([4.0, 5.0, 6.0]), 0).tolist() == [-3.0, 6.0, -3.0]
    ints = tg.tensor([[1, 2, 3]]).cross(tg.tensor([[4, 5, 6]]), dim=1)
    assert ints.dtype == tg.int64 and ints.tolist() == [[-3, 6, -3]]


def test_cross_default_dim_is_deprecated():
    # no dim: the first dimension of size 3 (of the input), with PyTorch's deprecation warning
    x, y = _ar(3, 3), _ar(3, 3).flip(0)
    with pytest.warns(UserWarning, match=r"^Using torch\.cross without specifying the dim arg is deprecated\.\n"
                                         r"Please either pass the dim explicitly or simply use torch\.linalg\.cross\."):
        z = tg.cross(x, y)
    assert z.tolist() == tg.cross(x, y, dim=0).tolist()
    with pytest.warns(UserWarning):
        assert tg.cross(_ar(2, 3), _ar(2, 3) + 1.0).tolist() == tg.cross(_ar(2, 3), _ar(2, 3) + 1.0, 1).tolist()
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="^no dimension of size 3 in input$"):
        tg.cross(_ar(2, 4), _ar(2, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tg.cross(x, y, 1)           # (no warning with a dim)


def test_cross_default_dim_matches_torch():
    torch = pytest.importorskip("torch")
    a, b = np.arange(9.0).reshape(1, 3, 3), np.arange(27.0).reshape(3, 3, 3) % 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.cross(torch.tensor(a), torch.tensor(b)).numpy()
        got = tg.cross(tg.tensor(a), tg.tensor(b)).numpy()
    np.testing.assert_array_equal(got, want)


def test_repeat_interleave_values():
    v = tg.tensor([1.0, 2.0, 3.0])
    assert tg.repeat_interleave(v, 2).tolist() == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    assert v.repeat_interleave(tg.tensor([0, 1, 2])).tolist() == [2.0, 3.0, 3.0]
    assert tg.repeat_interleave(_ar(2, 2), 2).tolist() == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    assert tg.repeat_interleave(_ar(2, 2), tg.tensor([2, 1]), dim=0).tolist() == [[0.0, 1.0], [0.0, 1.0],
                                                                                [2.0, 3.0]]
    assert tg.repeat_interleave(_ar(2, 2), 2, 1, output_size=4).tolist() == [[0.0, 0.0, 1.0, 1.0],
                                                                             [2.0, 2.0, 3.0, 3.0]]
    r = tg.repeat_interleave(tg.tensor([1, 2, 0, 1]))
    assert r.tolist() == [0, 1, 1, 3] and r.dtype == tg.int64
    assert tg.repeat_interleave(tg.tensor([2, 1], dtype=tg.int32)).dtype == tg.int32
    assert tg.repeat_interleave(tg.tensor([1, 1]), output_size=2).tolist() == [0, 1]
    assert tg.repeat_interleave(tg.tensor(2.0), 3).tolist() == [2.0, 2.0, 2.0]


def test_pad_values():
    F = tg.nn.functional
    x = tg.tensor([[0.0, 1.0, 2.0, 3.0]])
    assert F.pad(x, (2, 3), mode="circular").tolist() == [[2.0, 3.0, 0.0, 1.0, 2.0, 3.0, 0.0, 1.0, 2.0]]
    assert F.pad(x, (3, 2), mode="reflect").tolist() == [[3.0, 2.0, 1.0, 0.0, 1.0, 2.0, 3.0, 2.0, 1.0]]
    assert F.pad(x, (2, 3), mode="replicate").tolist() == [[0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 3.0, 3.0, 3.0]]
    assert F.pad(x, (1, -2), value=7.0).tolist() == [[7.0, 0.0, 1.0]]
    assert F.pad(x, (0, 0, 1, 0)).tolist() == [[0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 2.0, 3.0]]
    assert F.pad(x, [-4, 0]).shape == (1, 0)
    assert F.pad(tg.ones(2, dtype=tg.int64), (1, 1), value=2.7).tolist() == [2, 1, 1, 2]     # (cast, as PyTorch)
    assert F.pad(tg.ones(1, 2, dtype=tg.bool), (1, 0)).tolist() == [[False, True, True]]
    assert F.pad(tg.tensor(2.0), ()).tolist() == 2.0
    m = _ar(1, 3, 3)
    assert F.pad(m, (1, 1, 1, 1), mode="reflect")[0, 0].tolist() == [4.0, 3.0, 4.0, 5.0, 4.0]
    assert F.pad(m, (0, 0, 2, 0), mode="circular")[0, :, 0].tolist() == [3.0, 6.0, 0.0, 3.0, 6.0]


def test_pad_gradients_accumulate():
    # an edge element read several times gets every adjoint
    x = tg.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    tg.nn.functional.pad(x, (2, 1), mode="replicate").sum().backward()
    assert x.grad.tolist() == [[3.0, 1.0, 2.0]]
    x.grad = None
    tg.nn.functional.pad(x, (2, 2), mode="reflect").sum().backward()       # (3 2 [1 2 3] 2 1)
    assert x.grad.tolist() == [[2.0, 3.0, 2.0]]
    x.grad = None
    (tg.nn.functional.pad(x, (1, -1), value=5.0) * tg.tensor([[10.0, 20.0, 30.0]])).sum().backward()
    assert x.grad.tolist() == [[20.0, 30.0, 0.0]]


def test_views_contiguous_flatten_values():
    x = _ar(2, 3)
    assert x.contiguous() is x
    t = x.t()
    c = t.contiguous()
    assert c is not t and c.tolist() == t.tolist() and c._data.flags.c_contiguous
    assert x.view_as(tg.ones(3, 2)).tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    assert x.reshape_as(tg.ones(6)).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert tg.ones(1, 2).expand_as(tg.ones(3, 2)).shape == (3, 2)
    y = _ar(2, 3, 4)
    assert tg.flatten(y, 1).shape == (2, 12) and y.flatten(0, 1).shape == (6, 4) and y.flatten().shape == (24,)
    assert tg.unflatten(y, 2, (2, 2)).shape == (2, 3, 2, 2) and y.unflatten(0, (1, -1)).shape == (1, 2, 3, 4)
    assert tg.unflatten(y, -1, [4, 1]).tolist() == y.reshape(2, 3, 4, 1).tolist()
    assert tg.nn.Flatten()(y).shape == (2, 12) and tg.nn.Flatten(0, 1)(y).shape == (6, 4)
    assert tg.nn.Unflatten(1, (3, 1))(y).shape == (2, 3, 1, 4)
    assert repr(tg.nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"
    assert repr(tg.nn.Unflatten(1, (3, 1))) == "Unflatten(dim=1, unflattened_size=(3, 1))"
    v = y.view_as(tg.ones(24))
    y.add_(1.0)
    assert v._version == y._version and v[0].item() == 1.0


def test_unflatten_module_checks_its_sizes():
    for sizes, msg in ((3, "unflattened_size must be a tuple of ints, but found type int"),
                       ((2, 1.5), "unflattened_size must be tuple of ints, but found element of type float at pos 1")):
        with pytest.raises(TypeError) as e:
            tg.nn.Unflatten(1, sizes)
        assert str(e.value) == msg


def test_module_reprs_match_torch():
    torch = pytest.importorskip("torch")
    for f in (lambda m: m.nn.Flatten(), lambda m: m.nn.Flatten(0, 2), lambda m: m.nn.Unflatten(1, (3, 1)),
              lambda m: m.nn.Unflatten(-1, [2, 2])):
        assert repr(f(tg)) == repr(f(torch))
    for sizes in (3, (2, 1.5)):
        with pytest.raises(TypeError) as e:
            torch.nn.Unflatten(1, sizes)
        with pytest.raises(TypeError) as g:
            tg.nn.Unflatten(1, sizes)
        assert str(e.value) == str(g.value)


# -- errors --------------------------------------------------------------------------------
def _dim_msg(lo, hi, got):
    return "Dimension out of range (expected to be in range of [%d, %d], but got %d)" % (lo, hi, got)


A, B = np.ones((2, 3)), np.ones((3, 4))
_NOT_SUPPORTED = ("Padding size %d is not supported for %dD input tensor.\nSupported combinations for non-constant "
                  "padding:\n  - 2D or 3D input: padding size = 2 (pads last dimension)\n  - 3D or 4D input: padding "
                  "size = 4 (pads last 2 dimensions)\n  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
ERRORS = [
    # (f(module, a (2, 3), b (3, 4)), type, message): PyTorch's, literally
    (lambda m, a, b: m.einsum("ij,jk->ik", a), RuntimeError,
     "einsum(): fewer operands were provided than specified in the equation"),
    (lambda m, a, b: m.einsum("ij,jk->ik", a, b, a), RuntimeError,
     "einsum(): more operands were provided than specified in the equation"),
    (lambda m, a, b: m.einsum("ijk,jk->ik", a, b), RuntimeError, "einsum(): the number of subscripts in the equation "
     "(3) does not match the number of dimensions (2) for operand 0 and no ellipsis was given"),
    (lambda m, a, b: m.einsum("ij,j", a, b), RuntimeError, "einsum(): the number of subscripts in the equation (1) "
     "does not match the number of dimensions (2) for operand 1 and no ellipsis was given"),
    (lambda m, a, b: m.einsum("...ijk->ij", a), RuntimeError, "einsum(): the number of subscripts in the equation (3) "
     "is more than the number of dimensions (2) for operand 0"),
    (lambda m, a, b: m.einsum("ij,jk->iz", a, b), RuntimeError,
     "einsum(): output subscript z does not appear in the equation for any input operand"),
    (lambda m, a, b: m.einsum("ij->z", a), RuntimeError,
     "einsum(): output subscript z does not appear in the equation for any input operand"),
    (lambda m, a, b: m.einsum("ij,jk->ii", a, b), RuntimeError,
     "einsum(): output subscript i appears more than once in the output"),
    (lambda m, a, b: m.einsum("ij,jk->ik", a, b.t()), RuntimeError,
     "einsum(): subscript j has size 4 for operand 1 which does not broadcast with previously seen size 3"),
    (lambda m, a, b: m.einsum("ii", a), RuntimeError,
     "einsum(): subscript i is repeated for operand 0 but the sizes don't match, 3 != 2"),
    (lambda m, a, b: m.einsum("i.j", a), RuntimeError,
     "einsum(): found '.' for operand 0 that is not part of any ellipsis"),
    (lambda m, a, b: m.einsum("ij..", a), RuntimeError,
     "einsum(): found '.' for operand 0 that is not part of any ellipsis"),
    (lambda m, a, b: m.einsum("...i...j", a), RuntimeError,
     "einsum(): found '.' for operand 0 for which an ellipsis was already found"),
    (lambda m, a, b: m.einsum("ij,...j.", a, b), RuntimeError,
     "einsum(): found '.' for operand 1 for which an ellipsis was already found"),
    (lambda m, a, b: m.einsum("i1", a), RuntimeError, "einsum(): invalid subscript given at index 1 in the equation "
     "string, subscripts must be in [a-zA-Z]"),
    (lambda m, a, b: m.einsum("i j->i 1", a), RuntimeError, "einsum(): invalid subscript given at index 7 in the "
     "equation string, subscripts must be in [a-zA-Z]"),
    (lambda m, a, b: m.einsum("ij->ij->", a), RuntimeError, "einsum(): invalid subscript given at index 6 in the "
     "equation string, subscripts must be in [a-zA-Z]"),
    (lambda m, a, b: m.einsum("ij->i.", a), RuntimeError,
     "einsum(): found '.' for output that is not part of any ellipsis (...)"),
    (lambda m, a, b: m.einsum("ij->...i...", a), RuntimeError,
     "einsum(): found '.' for output but an ellipsis (...) was already found"),
    (lambda m, a, b: m.einsum("...,...", a, m.ones(4, 3)), RuntimeError, "einsum(): dimension 0 covered by ellipsis "
     "in operand 1has size 4 which does not broadcast with previously seen ellipsis with size 2 for the respective "
     "dimension"),
    (lambda m, a, b: m.einsum("i...,i...", m.ones(3, 2, 5), m.ones(3, 4)), RuntimeError, "einsum(): dimension 1 "
     "covered by ellipsis in operand 1has size 4 which does not broadcast with previously seen ellipsis with size 5 "
     "for the respective dimension"),
    (lambda m, a, b: m.einsum("ij"), ValueError, "einsum(): must specify the equation string and at least one "
     "operand, or at least one operand and its subscripts list"),
    (lambda m, a, b: m.einsum(3, a), TypeError, "einsum(): argument 'equation' (position 1) must be str, not int"),
    (lambda m, a, b: m.einsum("ij,jk", a, 3), TypeError, "expected Tensor as element 1 in argument 1, but got int"),
    (lambda m, a, b: m.einsum(a, [0, 52]), ValueError,
     "einsum(): subscript in subscript list is not within the valid range [0, 52)"),
    (lambda m, a, b: m.einsum("ij,jk->ik", a, b.float()), RuntimeError, "expected scalar type Double but found Float"),
    (lambda m, a, b: m.einsum("i,i->", a[0], a[0].long()), RuntimeError, "expected scalar type Double but found Long"),
    (lambda m, a, b: m.einsum("ij,jk", a.bool(), b.bool()), NotImplementedError, "\"bmm\" not implemented for 'Bool'"),
    # tensordot
    (lambda m, a, b: m.tensordot(a, b), RuntimeError, "contracted dimensions need to match, but first has size 2 in "
     "dim -2 and second has size 3 in dim 0"),
    (lambda m, a, b: m.tensordot(a, b, -1), RuntimeError, "tensordot expects dims >= 0, but got dims=-1"),
    (lambda m, a, b: m.tensordot(a, b, 3), RuntimeError, "tensordot expects dims < ndim_a or ndim_b, but got dims=3"),
    (lambda m, a, b: m.tensordot(a, b, ([1], [1])), RuntimeError, "contracted dimensions need to match, but first has "
     "size 3 in dim 1 and second has size 4 in dim 1"),
    (lambda m, a, b: m.tensordot(a, b, ([1], [0, 1])), RuntimeError, "both dimension lists should have same length"),
    (lambda m, a, b: m.tensordot(a, b, ([1], [5])), IndexError, _dim_msg(-2, 1, 5)),
    (lambda m, a, b: m.tensordot(a, b, ([1, 1], [0, 0])), RuntimeError,
     "dim 1 appears multiple times in the list of dims"),
    (lambda m, a, b: m.tensordot(a, b, (1, 0)), TypeError,
     "tensordot(): argument 'dims_self' (position 3) must be tuple of ints, not int"),
    (lambda m, a, b: m.tensordot(a, b.float(), 1), RuntimeError, "both inputs should have same dtype"),
    (lambda m, a, b: m.tensordot(a, b, 1.5), RuntimeError, "tensordot expects dims to be int or tuple[list[int], "
     "list[int]] or list[list[int]] containing two lists, but got dims=1.5"),
    # cross
    (lambda m, a, b: m.cross(b, b, dim=1), RuntimeError,
     "linalg.cross: inputs dimension 1 must have length 3. Got 4 and 4"),
    (lambda m, a, b: m.cross(a, b, dim=1), RuntimeError,
     "linalg.cross: inputs dimension 1 must have length 3. Got 3 and 4"),
    (lambda m, a, b: m.cross(a, a[0], dim=1), RuntimeError,
     "linalg.cross: inputs must have the same number of dimensions."),
    (lambda m, a, b: m.cross(a, a, dim=2), IndexError, _dim_msg(-2, 1, 2)),
    (lambda m, a, b: m.cross(a, a.float(), dim=1), RuntimeError, "expected scalar type Double but found Float"),
    (lambda m, a, b: m.cross(a, m.ones(3, 3, dtype=a.dtype), dim=1), RuntimeError, "The size of tensor a (2) must "
     "match the size of tensor b (3) at non-singleton dimension 0"),
    (lambda m, a, b: m.cross(a.bool(), a.bool(), dim=1), NotImplementedError, "\"cross\" not implemented for 'Bool'"),
    (lambda m, a, b: m.cross(a, 3, dim=1), TypeError, "cross(): argument 'other' (position 2) must be Tensor, not int"),
    # repeat_interleave
    (lambda m, a, b: m.repeat_interleave(a, m.tensor([1, 2, 3]), dim=0), RuntimeError, "repeats must have the same "
     "size as input along dim, but got repeats.size(0) = 3 and input.size(0) = 2"),
    (lambda m, a, b: m.repeat_interleave(a, m.tensor([1, -2]), dim=0), RuntimeError, "repeats can not be negative"),
    (lambda m, a, b: m.repeat_interleave(a, -1, dim=0), RuntimeError, "Repeats must be non-negative"),
    (lambda m, a, b: m.repeat_interleave(a, m.tensor([1.0, 2.0], dtype=m.float32), dim=0), NotImplementedError,
     "\"repeat_interleave_cpu\" not implemented for 'Float'"),
    (lambda m, a, b: m.repeat_interleave(a, m.tensor([[1, 2]]), dim=0), RuntimeError,
     "repeats must be 0-dim or 1-dim tensor"),
    (lambda m, a, b: m.repeat_interleave(a, m.tensor([1, 2]), dim=0, output_size=4), RuntimeError,
     "allocated size does not match required size"),
    (lambda m, a, b: m.repeat_interleave(a, 2, dim=0, output_size=5), RuntimeError,
     "repeat_interleave: Invalid output_size, expected 4 but got 5"),
    (lambda m, a, b: m.repeat_interleave(a, 2, dim=2), IndexError, _dim_msg(-2, 1, 2)),
    (lambda m, a, b: m.repeat_interleave(m.tensor([1, 2, 0]), output_size=2), RuntimeError,
     "allocated size does not match required size"),
    (lambda m, a, b: m.repeat_interleave(m.tensor([1.0, 2.0], dtype=m.float32)), NotImplementedError,
     "\"repeat_interleave_cpu\" not implemented for 'Float'"),
    (lambda m, a, b: m.repeat_interleave(m.tensor(3)), RuntimeError, "repeat_interleave only accept 1D vector as repeat"),
    (lambda m, a, b: m.repeat_interleave(m.tensor([-1])), RuntimeError, "repeats can not be negative"),
    # pad
    (lambda m, a, b: _pad(m, a, (1, 2, 3)), RuntimeError, "Padding length must be divisible by 2"),
    (lambda m, a, b: _pad(m, a, (1, 2, 3, 4, 5, 6)), RuntimeError, "Padding length should be less than or equal to "
     "two times the input dimension but got padding length 6 and input of dimension 2"),
    (lambda m, a, b: _pad(m, a, (-2, -2)), RuntimeError, "narrow(): length must be non-negative."),
    (lambda m, a, b: _pad(m, a, (1, 1), mode="foo"), NotImplementedError, "Unrecognised padding mode foo"),
    (lambda m, a, b: _pad(m, a, (1, 1), mode="reflect", value=1.0), RuntimeError,
     "Padding mode \"reflect\" doesn't take in value argument"),
    (lambda m, a, b: _pad(m, a, (1, 1), mode="circular", value=2.0), RuntimeError,
     "Padding mode \"circular\" doesn't take in value argument"),
    (lambda m, a, b: _pad(m, a, (1.5, 1)), TypeError,
     "pad(): argument 'pad' (position 2) must be tuple of ints, but found element of type float at pos 0"),
    (lambda m, a, b: _pad(m, a, 1), TypeError, "pad(): argument 'pad' (position 2) must be tuple of ints, not int"),
    (lambda m, a, b: _pad(m, a, (3, 1), mode="reflect"), RuntimeError, "Argument #4: Padding size should be less than "
     "the corresponding input dimension, but got: padding (3, 1) at dimension 1 of input [2, 3]"),
    (lambda m, a, b: _pad(m, a[None], (0, 0, 2, 0), mode="reflect"), RuntimeError, "Argument #6: Padding size should "
     "be less than the corresponding input dimension, but got: padding (2, 0) at dimension 1 of input [1, 2, 3]"),
    (lambda m, a, b: _pad(m, a[None, None], (0, 0, 0, 0, 2, 0), mode="reflect"), RuntimeError, "Argument #8: Padding "
     "size should be less than the corresponding input dimension, but got: padding (2, 0) at dimension 1 of input "
     "[1, 1, 2, 3]"),
    (lambda m, a, b: _pad(m, a, (1, 1, 1, 1), mode="reflect"), NotImplementedError, _NOT_SUPPORTED % (4, 2)),
    (lambda m, a, b: _pad(m, a[0], (1, 1), mode="replicate"), NotImplementedError, _NOT_SUPPORTED % (2, 1)),
    (lambda m, a, b: _pad(m, m.ones(1, 2, 3, 4, 5, 6), (1, 1), mode="circular"), NotImplementedError,
     _NOT_SUPPORTED % (2, 6)),
    (lambda m, a, b: _pad(m, a, (), mode="reflect"), NotImplementedError, _NOT_SUPPORTED % (0, 2)),
    (lambda m, a, b: _pad(m, m.ones(2, 0), (1, 1), mode="reflect"), RuntimeError, "Expected 2D or 3D (batch mode) "
     "tensor with possibly 0 batch size and other non-zero dimensions for input, but got: [2, 0]"),
    (lambda m, a, b: _pad(m, m.ones(0, 3), (1, 1), mode="replicate"), RuntimeError, "Expected 2D or 3D (batch mode) "
     "tensor with possibly 0 batch size and other non-zero dimensions for input, but got: [0, 3]"),
    (lambda m, a, b: _pad(m, m.ones(2, 0, 3, 4), (1, 1, 1, 1, 1, 1), mode="replicate"), RuntimeError,
     "Expected 4D or 5D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but "
     "got: [2, 0, 3, 4]"),
    (lambda m, a, b: _pad(m, a, (-3, 0), mode="replicate"), RuntimeError,
     "input (W: 3) is too small. Calculated output W: 0"),
    (lambda m, a, b: _pad(m, a, (-2, -1), mode="reflect"), RuntimeError,
     "input (W: 3) is too small. Calculated output W: 0"),
    (lambda m, a, b: _pad(m, a, (4, 0), mode="circular"), RuntimeError,
     "Padding value causes wrapping around more than once."),
    (lambda m, a, b: _pad(m, a[None], (0, 0, -3, 0), mode="circular"), RuntimeError,
     "Negative padding value is resulting in an empty dimension"),
    (lambda m, a, b: _pad(m, a[None], (0, 0, -3, 0), mode="replicate"), RuntimeError,
     "Trying to create tensor with negative dimension -1: [1, -1, 3]"),
    # views and flattening
    (lambda m, a, b: m.unflatten(b, 1, (2, 3)), RuntimeError,
     "unflatten: Provided sizes [2, 3] don't multiply up to the size of dim 1 (4) in the input tensor"),
    (lambda m, a, b: b.unflatten(-1, (3, 2)), RuntimeError,
     "unflatten: Provided sizes [3, 2] don't multiply up to the size of dim 1 (4) in the input tensor"),
    (lambda m, a, b: m.unflatten(b, 1, ()), RuntimeError, "unflatten: sizes must be non-empty"),
    (lambda m, a, b: m.unflatten(b, 2, (2, 2)), IndexError, _dim_msg(-2, 1, 2)),
    (lambda m, a, b: m.flatten(a, 2), IndexError, _dim_msg(-2, 1, 2)),
    (lambda m, a, b: m.flatten(m.ones(2, 3, 4), 2, 1), RuntimeError,
     "flatten() has invalid args: start_dim cannot come after end_dim"),
    (lambda m, a, b: a.view_as(b), RuntimeError, "shape '[3, 4]' is invalid for input of size 6"),
    (lambda m, a, b: a.view_as(3), TypeError, "view_as(): argument 'other' (position 1) must be Tensor, not int"),
    (lambda m, a, b: a.reshape_as(3), TypeError, "reshape_as(): argument 'other' (position 1) must be Tensor, not int"),
    (lambda m, a, b: a.expand_as(b), RuntimeError, "The expanded size of the tensor (4) must match the existing size "
     "(3) at non-singleton dimension 1.  Target sizes: [3, 4].  Tensor sizes: [2, 3]"),
]


def _raised(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn()
        except Exception as e:      # noqa: BLE001  (compared by type and message)
            return type(e), str(e)
    raise AssertionError("did not raise")


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors(case):
    f, kind, msg = ERRORS[case]
    assert _raised(lambda: f(tg, tg.tensor(A), tg.tensor(B))) == (kind, msg)


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_match_torch(case, monkeypatch):
    torch = pytest.importorskip("torch")
    # (with opt_einsum installed, as jax installs it, torch.einsum checks the operands there first
    # and raises opt_einsum's ValueError: PyTorch's own message is the one compared)
    monkeypatch.setattr(torch.backends.opt_einsum, "enabled", False)
    f, kind, msg = ERRORS[case]
    assert _raised(lambda: f(torch, torch.tensor(A), torch.tensor(B))) == (kind, msg)


def test_unflatten_two_inferred_sizes():
    # (PyTorch wraps the reshape's message in "unflatten got an unexpected error" and its C++ trace)
    with pytest.raises(RuntimeError, match="^only one dimension can be inferred$"):
        tg.unflatten(tg.ones(2, 6), 1, (-1, -1))


def test_out_is_written():
    out = tg.ones(())
    assert tg.tensordot(tg.ones(2), tg.ones(2), 1, out=out) is out and out.item() == 2.0
    out = tg.ones(3)
    assert tg.cross(tg.tensor([1.0, 0, 0]), tg.tensor([0.0, 1, 0]), 0, out=out).tolist() == [0.0, 0.0, 1.0]
    with pytest.raises(TypeError, match="unexpected keyword argument 'out'"):
        tg.einsum("i", tg.ones(2), out=None)


# -- second derivative, replay ----------------------------------------------------------------
def test_create_graph_second_derivative():
    # f = sum_ij (x x^T)_ij^2 = sum_ij (sum_k x_ik x_jk)^2; its gradient's derivative, checked numerically
    x = tg.tensor([[1.0, 2.0], [0.5, -1.0]], requires_grad=True)
    (g,) = tg.autograd.grad((tg.einsum("ik,jk->ij", x, x) ** 2).sum(), x, create_graph=True)
    xv = x.detach().numpy()
    np.testing.assert_allclose(g.detach().numpy(), 4.0 * (xv @ xv.T) @ xv, rtol=1e-14)
    (h,) = tg.autograd.grad(g.sum(), x)
    eps = 1e-6
    num = np.zeros_like(xv)
    for i in np.ndindex(xv.shape):
        d = np.zeros_like(xv)
        d[i] = eps
        num[i] = ((4.0 * ((xv + d) @ (xv + d).T) @ (xv + d)).sum() - (4.0 * ((xv - d) @ (xv - d).T) @ (xv - d)).sum()) \
            / (2 * eps)
    np.testing.assert_allclose(h.numpy(), num, rtol=1e-7)


def _body(x, v, w):
    F = tg.nn.functional
    a = tg.einsum("ij,jk,k->i", x, x.t(), v)
    b = tg.einsum("ii", x[:, :3]) * tg.einsum("...j,...j", v, w)
    c = tg.tensordot(x, x, ([1], [1])) + tg.tensordot(v, w, 0)
    d = tg.cross(v, w, dim=0)
    e = tg.repeat_interleave(x, tg.tensor([1, 0, 2]), dim=0) + tg.repeat_interleave(x, 2, 0)[:3]
    f = F.pad(x[None], (1, 2), mode="reflect") * F.pad(x[None], (2, 1), mode="replicate")
    g = F.pad(x[None], (0, 0, 1, 2), mode="circular").sum() + F.pad(x, (1, -1, 0, 1), value=3.0).sum()
    h = x.t().contiguous().view_as(tg.ones(12)).unflatten(0, (2, 6)).flatten(0, 1).reshape_as(x)
    return ((a ** 2).sum() + b + (c ** 2).sum() + (d * d).sum() + (e * e).sum() + f.sum() + g
            + (h * x).sum() + tg.nn.Flatten(0)(x).sum())


def _eager(*vals):
    ts = [tg.tensor(v, requires_grad=True) for v in vals]
    out = _body(*ts)
    out.backward()
    return out.item(), [t.grad.numpy() for t in ts]


def _new_inputs(rng):
    return rng.standard_normal((3, 4)), rng.standard_normal(3), rng.standard_normal(3)


def test_compile_replays_with_new_inputs():
    cf = tg.compile(_body)
    rng = np.random.default_rng(3)
    for _ in range(3):
        vals = _new_inputs(rng)
        ts = [tg.tensor(v, requires_grad=True) for v in vals]
        out = cf(*ts)
        out.backward()
        value, grads = _eager(*vals)
        assert out.item() == pytest.approx(value, rel=1e-13)
        for t, g in zip(ts, grads):
            np.testing.assert_allclose(t.grad.numpy(), g, rtol=1e-12, atol=1e-13)
    assert cf.stats.recordings == 1 and cf.stats.replays == 2


def test_record_replays_with_new_inputs():
    rng = np.random.default_rng(4)
    tape = tg.record(_body, *_new_inputs(rng))
    vals = _new_inputs(rng)
    value, grads = tape.value_and_grad(*vals)
    ev, egrads = _eager(*vals)
    assert value == pytest.approx(ev, rel=1e-13)
    for g, e in zip(grads, egrads):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-13)


def test_repeats_argument_is_a_guard_in_replay():
    # repeats passed as an argument: a replay with other counts records again
    cf = tg.compile(lambda x, r: (tg.repeat_interleave(x, r) * tg.arange(1.0, 4.0)).sum())
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    for reps, want, grad in (([2, 1], 1.0 + 2.0 + 6.0, [3.0, 3.0]), ([2, 1], 9.0, [3.0, 3.0]),
                             ([1, 2], 1.0 + 4.0 + 6.0, [1.0, 5.0])):
        x.grad = None
        y = cf(x, tg.tensor(reps))
        y.backward()
        assert y.item() == want and x.grad.tolist() == grad
    assert cf.stats.replays == 1 and cf.stats.recordings == 2


def _random_equations(count, seed):
    """Equations over the labels a-e (sizes 1-3), 1-4 operands of up to 3 labels (a label
    may repeat inside one), an explicit output of labels that appear, or an implicit one."""
    rng = np.random.default_rng(seed)
    size = dict(zip("abcde", rng.integers(1, 4, 5)))
    out = []
    while len(out) < count:
        ops = ["".join(rng.choice(list("abcde"), rng.integers(0, 4))) for _ in range(rng.integers(1, 5))]
        seen = sorted(set("".join(ops)))
        if rng.random() < 0.3:
            eq = ",".join(ops)
        else:
            k = rng.integers(0, len(seen) + 1)
            eq = ",".join(ops) + "->" + "".join(rng.permutation(seen)[:k])
        out.append((eq, [tuple(int(size[c]) for c in o) for o in ops]))
    return out


@pytest.mark.parametrize("eq,shapes", _random_equations(60, 7))
def test_random_equations_match_numpy(eq, shapes):
    rng = np.random.default_rng(len(eq))
    vals = [rng.standard_normal(s) for s in shapes]
    got = tg.einsum(eq, *[tg.tensor(v) for v in vals])
    np.testing.assert_allclose(got.numpy(), np.einsum(eq, *vals), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("eq,shapes", _random_equations(20, 8))
def test_random_equations_gradcheck(eq, shapes):
    rng = np.random.default_rng(len(eq))
    xs = [tg.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]
    assert tg.autograd.gradcheck(lambda *a: tg.einsum(eq, *a), xs)
