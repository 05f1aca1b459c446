"""The shape ops PyTorch has and tapegrad makes from its views, gathers, cat and
elementwise ops: split, chunk, unbind, tensor_split, narrow, select, unfold, repeat, tile, roll,
flip, fliplr, flipud, rot90, tril, triu, diag, diag_embed, trace, movedim,
swapaxes, atleast_nd, the stacks, outer, inner, kron, block_diag, cartesian_prod
and meshgrid.  Each is checked against literal values, against PyTorch (values,
dtypes, grad_fn names, views, gradients, errors) where torch is installed, by
gradcheck and gradgradcheck, through the compiled and the interpreted reverse, and
in a tg.compile / tg.record replay."""
import numpy as np
import pytest

import tapegrad as tg

from case_tables import shape_tests


# name -> (f(module, *inputs), input shapes): each f runs unchanged on tapegrad and on torch
CASES = {
    "split_int": (lambda m, x: m.split(x, 2, 1), [(2, 5, 4)]),
    "split_sizes": (lambda m, x: x.split([1, 3, 1], 1), [(2, 5, 4)]),
    "split_last": (lambda m, x: m.split(x, 3, dim=-1), [(2, 5, 4)]),
    "chunk": (lambda m, x: m.chunk(x, 3, 1), [(2, 5, 4)]),
    "chunk_method": (lambda m, x: x.chunk(2, dim=2), [(2, 5, 4)]),
    "unbind": (lambda m, x: m.unbind(x, 1), [(2, 5, 4)]),
    "unbind_method": (lambda m, x: x.unbind(), [(2, 5, 4)]),
    "tensor_split_sections": (lambda m, x: m.tensor_split(x, 3, 1), [(2, 5, 4)]),
    "tensor_split_indices": (lambda m, x: x.tensor_split([1, -1, 7], 1), [(2, 5, 4)]),
    "narrow": (lambda m, x: m.narrow(x, 1, -3, 2), [(2, 5, 4)]),
    "narrow_method": (lambda m, x: x.narrow(2, 1, 2), [(2, 5, 4)]),
    "select": (lambda m, x: m.select(x, -2, -1), [(2, 5, 4)]),
    "select_method": (lambda m, x: x.select(0, 1), [(2, 5, 4)]),
    "unfold": (lambda m, x: x.unfold(1, 2, 2), [(2, 5, 4)]),
    "unfold_overlapping": (lambda m, x: x.unfold(-1, 3, 1), [(2, 5, 4)]),
    "unfold_scalar": (lambda m, x: x.unfold(0, 1, 3), [()]),
    "repeat": (lambda m, x: x.repeat(2, 1, 2, 1), [(2, 5, 4)]),
    "repeat_same_ndim": (lambda m, x: x.repeat((1, 3)), [(2, 3)]),
    "tile": (lambda m, x: m.tile(x, (2, 1)), [(2, 5, 4)]),
    "tile_method": (lambda m, x: x.tile(2, 1, 1, 1), [(2, 5, 4)]),
    "roll": (lambda m, x: m.roll(x, 2, 1), [(2, 5, 4)]),
    "roll_flat": (lambda m, x: m.roll(x, -3), [(2, 5, 4)]),
    "roll_tuple": (lambda m, x: m.roll(x, (1, -2), (0, 2)), [(2, 5, 4)]),
    "roll_same_dim_twice": (lambda m, x: x.roll((1, 3), (1, 1)), [(2, 5, 4)]),
    "flip": (lambda m, x: m.flip(x, (0, 2)), [(2, 5, 4)]),
    "flip_method": (lambda m, x: x.flip(1), [(2, 5, 4)]),
    "flip_method_list": (lambda m, x: x.flip([-1, 0]), [(2, 5, 4)]),
    "fliplr": (lambda m, x: m.fliplr(x), [(2, 5, 4)]),
    "flipud": (lambda m, x: x.flipud(), [(2, 5, 4)]),
    "rot90": (lambda m, x: m.rot90(x, 1, (1, 2)), [(2, 5, 4)]),
    "rot90_k2": (lambda m, x: m.rot90(x, 2, [0, 2]), [(2, 5, 4)]),
    "rot90_k3": (lambda m, x: m.rot90(x, 3, (2, 1)), [(2, 5, 4)]),
    "rot90_k_neg": (lambda m, x: x.rot90(-1, (0, -1)), [(2, 5, 4)]),
    "rot90_k0": (lambda m, x: m.rot90(x, 4, (0, 1)), [(2, 5, 4)]),
    "rot90_default": (lambda m, x: m.rot90(x), [(3, 4)]),
    "tril": (lambda m, x: m.tril(x), [(4, 5)]),
    "tril_batched": (lambda m, x: m.tril(x, -1), [(2, 5, 4)]),
    "triu": (lambda m, x: m.triu(x, diagonal=1), [(4, 5)]),
    "triu_method": (lambda m, x: x.triu(-2), [(2, 5, 4)]),
    "diag_vector": (lambda m, v: m.diag(v), [(4,)]),
    "diag_vector_offset": (lambda m, v: m.diag(v, -2), [(4,)]),
    "diag_matrix": (lambda m, x: m.diag(x), [(4, 5)]),
    "diag_matrix_offset": (lambda m, x: x.diag(2), [(4, 5)]),
    "diag_embed": (lambda m, x: m.diag_embed(x), [(2, 3)]),
    "diag_embed_dims": (lambda m, x: m.diag_embed(x, 1, 0, 2), [(2, 3)]),
    "diag_embed_reversed": (lambda m, x: x.diag_embed(-1, 2, 0), [(2, 3)]),
    "trace": (lambda m, x: m.trace(x), [(4, 5)]),
    "trace_method": (lambda m, x: x.trace(), [(3, 2)]),
    "movedim": (lambda m, x: m.movedim(x, 0, 2), [(2, 5, 4)]),
    "movedim_tuple": (lambda m, x: m.movedim(x, (0, 1), (2, 0)), [(2, 5, 4)]),
    "moveaxis": (lambda m, x: x.moveaxis(-1, 0), [(2, 5, 4)]),
    "swapaxes": (lambda m, x: m.swapaxes(x, 0, 2), [(2, 5, 4)]),
    "swapdims": (lambda m, x: x.swapdims(1, -1), [(2, 5, 4)]),
    "atleast_1d": (lambda m, s, v: m.atleast_1d(s, v), [(), (4,)]),
    "atleast_1d_one": (lambda m, s: m.atleast_1d(s), [()]),
    "atleast_2d": (lambda m, s, v, x: m.atleast_2d(s, v, x), [(), (4,), (2, 3)]),
    "atleast_3d": (lambda m, s, v, x, y: m.atleast_3d([s, v, x, y]), [(), (4,), (2, 3), (2, 1, 3)]),
    "vstack": (lambda m, v, x: m.vstack((v, x)), [(3,), (2, 3)]),
    "hstack": (lambda m, v, w: m.hstack([v, w]), [(3,), (2,)]),
    "hstack_matrices": (lambda m, x, y: m.hstack((x, y)), [(2, 3), (2, 1)]),
    "dstack": (lambda m, x, y: m.dstack([x, y]), [(2, 3), (2, 3)]),
    "column_stack": (lambda m, v, x: m.column_stack([v, x]), [(2,), (2, 3)]),
    "outer": (lambda m, v, w: m.outer(v, w), [(4,), (3,)]),
    "ger": (lambda m, v, w: v.ger(w), [(4,), (3,)]),
    "inner": (lambda m, x, y: m.inner(x, y), [(2, 5, 4), (3, 4)]),
    "inner_vectors": (lambda m, v, w: v.inner(w), [(4,), (4,)]),
    "inner_scalar": (lambda m, s, x: m.inner(s, x), [(), (2, 3)]),
    "kron": (lambda m, x, y: m.kron(x, y), [(2, 3), (3, 2)]),
    "kron_ranks": (lambda m, x, y: x.kron(y), [(2, 2, 2), (3, 2)]),
    "block_diag": (lambda m, x, v, s: m.block_diag(x, v, s), [(2, 3), (3,), ()]),
    "cartesian_prod": (lambda m, v, w: m.cartesian_prod(v, w), [(3,), (2,)]),
    "meshgrid_ij": (lambda m, v, w: m.meshgrid(v, w, indexing="ij"), [(3,), (2,)]),
    "meshgrid_xy": (lambda m, u, v, w: m.meshgrid([u, v, w], indexing="xy"), [(3,), (2,), (4,)]),
    "meshgrid_scalar": (lambda m, s, v: m.meshgrid(s, v, indexing="xy"), [(), (3,)]),
    # edge shapes: empty pieces and products, 0-d inputs, negative dims, four dimensions
    "split_empty_pieces": (lambda m, x: m.split(x, [0, 2, 0, 1]), [(3, 2)]),
    "chunk_more_than_size": (lambda m, x: m.chunk(x, 7, 1), [(2, 3)]),
    "movedim_scalar": (lambda m, s: m.movedim(s, 0, -1), [()]),
    "movedim_negative": (lambda m, x: m.movedim(x, (-1, 0), (0, -1)), [(2, 3, 4, 5)]),
    "rot90_4d": (lambda m, x: m.rot90(x, 3, (-1, 1)), [(2, 3, 4, 5)]),
    "roll_negative_dims": (lambda m, x: m.roll(x, (7, -5), (-1, -3)), [(2, 3, 4)]),
    "repeat_zero": (lambda m, v: v.repeat(0, 2), [(3,)]),
    "diag_embed_negative_dims": (lambda m, x: m.diag_embed(x, -1, -1, 1), [(2, 3, 2)]),
    "inner_empty": (lambda m, x, y: m.inner(x, y), [(2, 0), (3, 0)]),
    "kron_scalar": (lambda m, s, x: m.kron(s, x), [(), (2, 3)]),
    "block_diag_scalars": (lambda m, s, t: m.block_diag(s, t), [(), ()]),
}

# results that are views of their (first) input, in PyTorch and in tapegrad
VIEWS = {"split_int", "split_sizes", "split_last", "chunk", "chunk_method", "unbind", "unbind_method",
         "tensor_split_sections", "tensor_split_indices", "narrow", "narrow_method", "select", "select_method",
         "unfold", "unfold_overlapping", "unfold_scalar", "movedim", "movedim_tuple",
         "moveaxis", "swapaxes", "swapdims", "atleast_1d", "atleast_1d_one", "atleast_2d", "atleast_3d",
         "meshgrid_ij", "meshgrid_xy", "meshgrid_scalar", "split_empty_pieces", "chunk_more_than_size",
         "movedim_scalar", "movedim_negative"}


test_gradcheck, test_gradgradcheck, test_matches_torch, test_float32_matches_torch = shape_tests(CASES, views=VIEWS)


def test_tril_triu_in_place():
    x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = x * 2.0
    assert y.tril_() is y and y.tolist() == [[2.0, 0.0], [6.0, 8.0]]
    (y * tg.tensor([[1.0, 10.0], [100.0, 1000.0]])).sum().backward()
    assert x.grad.tolist() == [[2.0, 0.0], [200.0, 2000.0]]
    z = _ar(2, 3)
    z.triu_(1)
    assert z.tolist() == [[0.0, 1.0, 2.0], [0.0, 0.0, 5.0]]


# -- literal values (the file tests something without torch) ----------------------------
def _ar(*shape):
    return tg.arange(float(np.prod(shape))).reshape(*shape)


def _lists(ts):
    return [t.tolist() for t in ts]


def test_split_chunk_unbind_values():
    x = tg.arange(5.0)
    assert _lists(tg.split(x, 2)) == [[0.0, 1.0], [2.0, 3.0], [4.0]]
    assert _lists(x.split([1, 4])) == [[0.0], [1.0, 2.0, 3.0, 4.0]]
    assert _lists(tg.chunk(x, 2)) == [[0.0, 1.0, 2.0], [3.0, 4.0]]
    assert _lists(tg.arange(6.0).chunk(4)) == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]     # (3 pieces, as in PyTorch)
    assert _lists(tg.zeros(0).chunk(3)) == [[], [], []]
    assert _lists(tg.zeros(0, 2).split(2)) == [[]]
    m = _ar(2, 3)
    assert _lists(tg.unbind(m, 1)) == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert _lists(m.unbind()) == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert _lists(tg.tensor_split(tg.arange(7.0), 3)) == [[0.0, 1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    assert _lists(tg.tensor_split(tg.arange(5.0), [1, 3])) == [[0.0], [1.0, 2.0], [3.0, 4.0]]
    assert _lists(tg.tensor_split(tg.arange(5.0), [3, 1])) == [[0.0, 1.0, 2.0], [], [1.0, 2.0, 3.0, 4.0]]
    assert _lists(tg.tensor_split(tg.arange(5.0), tg.tensor([-1]))) == [[0.0, 1.0, 2.0, 3.0], [4.0]]
    assert _lists(tg.tensor_split(tg.arange(5.0), tg.tensor(2))) == [[0.0, 1.0, 2.0], [3.0, 4.0]]
    assert tg.narrow(m, 1, 1, 2).tolist() == [[1.0, 2.0], [4.0, 5.0]]
    assert m.narrow(0, -1, 1).tolist() == [[3.0, 4.0, 5.0]]
    assert m.narrow(1, tg.tensor(3), 0).shape == (2, 0)
    assert tuple(type(p) for p in tg.split(x, 2)) == (tg.Tensor,) * 3
    assert isinstance(tg.split(x, 2), tuple) and isinstance(x.unbind(), tuple)


def test_repeat_tile_roll_flip_rot90_values():
    v = tg.tensor([1.0, 2.0])
    assert v.repeat(2).tolist() == [1.0, 2.0, 1.0, 2.0]
    assert v.repeat(2, 1).tolist() == [[1.0, 2.0], [1.0, 2.0]]
    assert v.repeat(1, 0).shape == (1, 0)
    assert tg.tensor(3.0).repeat(2).tolist() == [3.0, 3.0]
    assert tg.tile(_ar(2, 2), (2,)).tolist() == [[0.0, 1.0, 0.0, 1.0], [2.0, 3.0, 2.0, 3.0]]
    assert _ar(1, 2).tile(2, 1).tolist() == [[0.0, 1.0], [0.0, 1.0]]
    assert tg.roll(tg.arange(5.0), 2).tolist() == [3.0, 4.0, 0.0, 1.0, 2.0]
    assert tg.roll(_ar(2, 3), 1).tolist() == [[5.0, 0.0, 1.0], [2.0, 3.0, 4.0]]      # (flattened)
    assert tg.roll(_ar(2, 3), (1, -1), (0, 1)).tolist() == [[4.0, 5.0, 3.0], [1.0, 2.0, 0.0]]
    assert tg.roll(tg.tensor(4.0), 3).tolist() == 4.0
    assert tg.roll(tg.arange(3.0), tg.tensor(1), 0).tolist() == [2.0, 0.0, 1.0]
    assert tg.flip(_ar(2, 3), (1,)).tolist() == [[2.0, 1.0, 0.0], [5.0, 4.0, 3.0]]
    assert _ar(2, 3).flip(0, 1).tolist() == [[5.0, 4.0, 3.0], [2.0, 1.0, 0.0]]
    assert tg.fliplr(_ar(2, 2)).tolist() == [[1.0, 0.0], [3.0, 2.0]]
    assert tg.flipud(_ar(2, 2)).tolist() == [[2.0, 3.0], [0.0, 1.0]]
    assert tg.flip(tg.tensor(2.0), ()).tolist() == 2.0
    m = _ar(2, 2)
    assert tg.rot90(m).tolist() == [[1.0, 3.0], [0.0, 2.0]]
    assert m.rot90(1, [1, 0]).tolist() == [[2.0, 0.0], [3.0, 1.0]]
    assert tg.rot90(m, 2).tolist() == [[3.0, 2.0], [1.0, 0.0]]
    assert tg.rot90(m, -1).tolist() == tg.rot90(m, 3).tolist() == [[2.0, 0.0], [3.0, 1.0]]
    assert tg.rot90(_ar(2, 3), 1).shape == (3, 2)


def test_triangles_and_diagonals_values():
    m = _ar(3, 3) + 1.0
    assert tg.tril(m).tolist() == [[1.0, 0.0, 0.0], [4.0, 5.0, 0.0], [7.0, 8.0, 9.0]]
    assert tg.triu(m, 1).tolist() == [[0.0, 2.0, 3.0], [0.0, 0.0, 6.0], [0.0, 0.0, 0.0]]
    assert m.tril(-1).tolist() == [[0.0, 0.0, 0.0], [4.0, 0.0, 0.0], [7.0, 8.0, 0.0]]
    assert m.triu(diagonal=-1).tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [0.0, 8.0, 9.0]]
    assert tg.tril(_ar(2, 2, 3), 5).tolist() == _ar(2, 2, 3).tolist()
    assert tg.diag(tg.tensor([1.0, 2.0])).tolist() == [[1.0, 0.0], [0.0, 2.0]]
    assert tg.diag(tg.tensor([1.0, 2.0]), 1).tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]]
    assert tg.diag(m).tolist() == [1.0, 5.0, 9.0]
    assert m.diag(-1).tolist() == [4.0, 8.0]
    assert tg.diag(m, 3).tolist() == []
    assert tg.diag_embed(tg.tensor([[1.0, 2.0], [3.0, 4.0]])).tolist() == [[[1.0, 0.0], [0.0, 2.0]],
                                                                         [[3.0, 0.0], [0.0, 4.0]]]
    assert tg.diag_embed(tg.tensor([[1.0, 2.0, 3.0]]), 1, 2, 0).tolist() == [
        [[0.0, 0.0, 0.0, 0.0]], [[1.0, 0.0, 0.0, 0.0]], [[0.0, 2.0, 0.0, 0.0]], [[0.0, 0.0, 3.0, 0.0]]]
    assert tg.trace(m).tolist() == 15.0 and _ar(2, 3).trace().tolist() == 4.0


def test_moves_and_stacks_values():
    x = _ar(2, 3, 4)
    assert tg.movedim(x, 0, -1).shape == (3, 4, 2) and x.moveaxis((0, 1), (2, 0)).shape == (3, 4, 2)
    assert tg.movedim(x, 0, 2).tolist() == x.permute(1, 2, 0).tolist()
    assert tg.swapaxes(x, 0, 2).shape == (4, 3, 2) and x.swapdims(0, 1).tolist() == x.transpose(0, 1).tolist()
    s, v = tg.tensor(2.0), tg.tensor([1.0, 2.0])
    assert tg.atleast_1d(s).tolist() == [2.0] and tg.atleast_1d(v) is v
    assert [t.shape for t in tg.atleast_2d(s, v)] == [(1, 1), (1, 2)]
    assert [t.shape for t in tg.atleast_3d([s, v, _ar(2, 3), x])] == [(1, 1, 1), (1, 2, 1), (2, 3, 1), (2, 3, 4)]
    assert tg.atleast_1d() == ()
    assert tg.vstack([v, v]).tolist() == [[1.0, 2.0], [1.0, 2.0]]
    assert tg.hstack([v, v]).tolist() == [1.0, 2.0, 1.0, 2.0]
    assert tg.hstack([s, s]).tolist() == [2.0, 2.0]
    assert tg.dstack([v, v]).tolist() == [[[1.0, 1.0], [2.0, 2.0]]]
    assert tg.column_stack([v, v]).tolist() == [[1.0, 1.0], [2.0, 2.0]]
    assert tg.column_stack([s, s]).tolist() == [[2.0, 2.0]]


def test_products_values():
    v, w = tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0, 5.0])
    assert tg.outer(v, w).tolist() == [[3.0, 4.0, 5.0], [6.0, 8.0, 10.0]]
    assert v.ger(w).tolist() == tg.outer(v, w).tolist()
    assert tg.inner(v, v).tolist() == 5.0
    assert tg.inner(_ar(2, 2), v).tolist() == [2.0, 8.0]
    assert tg.inner(tg.tensor(2.0), v).tolist() == [2.0, 4.0]
    assert tg.kron(tg.eye(2), tg.tensor([[1.0, 2.0]])).tolist() == [[1.0, 2.0, 0.0, 0.0], [0.0, 0.0, 1.0, 2.0]]
    assert tg.kron(v, w).tolist() == [3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
    assert tg.block_diag(tg.tensor([[1.0, 2.0]]), tg.tensor(3.0), w).tolist() == [
        [1.0, 2.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 3.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 3.0, 4.0, 5.0]]
    assert tg.block_diag().shape == (1, 0)
    assert tg.block_diag(tg.zeros(0, 2), v).tolist() == [[0.0, 0.0, 1.0, 2.0]]
    assert tg.cartesian_prod(v, w[:2]).tolist() == [[1.0, 3.0], [1.0, 4.0], [2.0, 3.0], [2.0, 4.0]]
    assert tg.cartesian_prod(v) is v
    gx, gy = tg.meshgrid(v, w, indexing="ij")
    assert gx.tolist() == [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]] and gy.tolist() == [[3.0, 4.0, 5.0]] * 2
    gx, gy = tg.meshgrid([v, w], indexing="xy")
    assert gx.tolist() == [[1.0, 2.0]] * 3 and gy.tolist() == [[3.0, 3.0], [4.0, 4.0], [5.0, 5.0]]
    with pytest.warns(UserWarning, match="it will be required to pass the indexing argument"):
        gx, gy = tg.meshgrid(v, w)
    assert gx.shape == (2, 3)


def test_dtypes():
    i = tg.tensor([[1, 2], [3, 4]], dtype=tg.int32)
    for r in (tg.flip(i, (0,)), tg.roll(i, 1), i.repeat(2, 1), tg.tril(i), tg.rot90(i), tg.diag(i),
              tg.diag_embed(i), i.split(1)[0], tg.movedim(i, 0, 1), tg.block_diag(i, i)):
        assert r.dtype == tg.int32
    b = tg.tensor([[True, True], [True, True]])
    assert tg.triu(b).tolist() == [[True, True], [False, True]] and tg.triu(b).dtype == tg.bool
    assert tg.trace(i).dtype == tg.int64 and tg.trace(i).item() == 5
    assert tg.trace(tg.ones(2, 2, dtype=tg.float32)).dtype == tg.float32
    assert tg.outer(tg.tensor([1, 2]), tg.tensor([0.5], dtype=tg.float32)).dtype == tg.float32
    assert tg.kron(i, tg.ones(1, dtype=tg.float32)).dtype == tg.float32
    assert tg.block_diag(i, tg.ones(1)).dtype == tg.float64
    assert tg.vstack([i, tg.ones(1, 2)]).dtype == tg.float64
    assert tg.inner(i, i).dtype == tg.int32 and tg.inner(i, i).tolist() == [[5, 11], [11, 25]]
    assert tg.block_diag().dtype == tg.float64


def test_nonfinite_outside_the_triangle():
    # tril/triu select (as PyTorch does), they do not multiply by a mask: inf * 0 would be nan
    x = tg.tensor([[1.0, np.inf], [np.nan, 2.0]], requires_grad=True)
    y = tg.tril(x)
    assert y.tolist()[0] == [1.0, 0.0] and y.tolist()[1][1] == 2.0 and np.isnan(y.tolist()[1][0])
    (y * tg.tensor([[2.0, 3.0], [4.0, 5.0]])).sum().backward()
    assert x.grad.tolist() == [[2.0, 0.0], [4.0, 5.0]]
    assert tg.triu(tg.tensor([[1.0, 2.0], [-np.inf, -0.0]])).tolist() == [[1.0, 2.0], [0.0, -0.0]]


def test_nonfinite_matches_torch():
    torch = pytest.importorskip("torch")
    v = [[1.0, np.inf, -0.0], [np.nan, 2.0, -np.inf]]
    for f in (lambda m, x: m.tril(x), lambda m, x: m.triu(x, 1), lambda m, x: m.diag(x[:, :2]),
              lambda m, x: m.flip(x, (1,)), lambda m, x: m.roll(x, 1, 1), lambda m, x: m.trace(x[:, 1:])):
        x, t = tg.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
        y, yt = f(tg, x), f(torch, t)
        np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
        assert np.array_equal(np.signbit(y.detach().numpy()), np.signbit(yt.detach().numpy()))
        y.sum().backward()
        yt.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


# -- views: PyTorch's views share storage and the version counter with their base ----------
@pytest.mark.parametrize("make", [
    lambda x: tg.split(x, 2, 1)[1], lambda x: x.chunk(3, 1)[0], lambda x: x.unbind(1)[2],
    lambda x: x.tensor_split(2, 2)[1], lambda x: x.narrow(1, 1, 2), lambda x: tg.movedim(x, 0, 2),
    lambda x: x.swapaxes(0, 1), lambda x: tg.diagonal(x, 0, 1, 2), lambda x: tg.atleast_3d(x[0, 0]),
    lambda x: tg.meshgrid(x[0, 0], x[1, 1], indexing="ij")[0], lambda x: x[0, 0].unbind()[2]],
    ids=["split", "chunk", "unbind", "tensor_split", "narrow", "movedim", "swapaxes", "diagonal", "atleast_3d",
         "meshgrid", "unbind_0d"])
def test_views_share_storage_and_version(make):
    base = _ar(2, 4, 4).requires_grad_()
    x = base * 1.0                  # (not a leaf: in-place ops allowed)
    v = make(x)
    assert v._version == x._version
    x.add_(1.0)
    assert v._version == x._version == 1
    np.testing.assert_array_equal(v.detach().numpy(), make(_ar(2, 4, 4) + 1.0).numpy())


# (the pieces, the op PyTorch names, the tensor after piece 1 is doubled where nothing requires grad)
_MULTI = [(lambda x: x.split(2), "Split", [1.0, 1.0, 2.0, 2.0]),
          (lambda x: x.split([1, 3]), "SplitWithSizes", [1.0, 2.0, 2.0, 2.0]),
          (lambda x: x.chunk(2), "Split", [1.0, 1.0, 2.0, 2.0]),
          (lambda x: x.unbind(), "Unbind", [1.0, 2.0, 1.0, 1.0])]


@pytest.mark.parametrize("k", range(len(_MULTI)))
def test_pieces_refuse_inplace_writes(k):
    # PyTorch: the outputs of a function returning several views may not be written in place
    make, op, doubled = _MULTI[k]
    msg = ("Output 1 of %s is a view and is being modified inplace. This view is the output of a function that "
           "returns multiple views. Such functions do not allow the output views to be modified inplace. You "
           "should replace the inplace operation by an out-of-place one." % op)
    x = tg.ones(4, requires_grad=True) * 1.0
    assert _raised(lambda: make(x)[1].mul_(2.0)) == (RuntimeError, msg)
    assert _raised(lambda: make(tg.ones(4, requires_grad=True))[1].add_(1.0)) == (RuntimeError, msg)
    with tg.no_grad():
        make(x)[1].mul_(2.0)            # (no grad mode: allowed, as in PyTorch)
    y = tg.ones(4)
    make(y)[1].mul_(2.0)                # (nothing requires grad: allowed)
    assert y.tolist() == doubled
    x.narrow(0, 1, 2).mul_(2.0)         # (narrow and tensor_split give plain views)
    x.tensor_split(2)[1].mul_(2.0)
    torch = pytest.importorskip("torch")
    assert _raised(lambda: make(torch.ones(4, requires_grad=True) * 1.0)[1].mul_(2.0)) == (RuntimeError, msg)


@pytest.mark.parametrize("view", [lambda p: p[0:1], lambda p: p.transpose(0, 0), lambda p: p.reshape(-1)[:1].t(),
                                  lambda p: p.split(1)[0]], ids=["slice", "transpose", "reshape_slice_t", "split"])
def test_views_of_pieces_refuse_inplace_writes(view):
    # the refusal carries over to views of a piece, named after the last view op (as PyTorch does)
    def write(m):
        x = m.ones(4, requires_grad=True) * 1.0
        view(x.split(2)[1]).mul_(2.0)
    got = _raised(lambda: write(tg))
    assert got[0] is RuntimeError and "is a view and is being modified inplace. This view is the output of a " \
        "function that returns multiple views." in got[1]
    torch = pytest.importorskip("torch")
    assert got == _raised(lambda: write(torch))


def test_keyword_spellings():
    # PyTorch's NumPy spelling axis= for dim=, and the methods' sequences by keyword
    x = _ar(2, 3)
    assert _lists(tg.chunk(x, 2, axis=1)) == _lists(x.chunk(2, 1))
    assert _lists(x.unbind(axis=1)) == _lists(x.unbind(1))
    assert _lists(tg.tensor_split(x, 2, axis=1)) == _lists(x.tensor_split(2, 1))
    assert x.flip(dims=[0]).tolist() == x.flip(0).tolist() == tg.flip(x, dims=(0,)).tolist()
    assert x.repeat(repeats=(2, 1)).tolist() == x.repeat(2, 1).tolist() == x.repeat([2, 1]).tolist()
    assert x.tile(dims=(2,)).tolist() == x.tile(2).tolist() == x.tile((1, 2)).tolist()
    with pytest.raises(TypeError, match=r"^flip\(\) got an unexpected keyword argument 'dim'$"):
        x.flip(dim=0)
    with pytest.raises(TypeError, match=r"^chunk\(\) got an unexpected keyword argument 'dims'$"):
        tg.chunk(x, 2, dims=0)


def test_tensor_split_keywords():
    x = tg.arange(5.0)
    assert _lists(tg.tensor_split(x, sections=2)) == [[0.0, 1.0, 2.0], [3.0, 4.0]]
    assert _lists(x.tensor_split(indices=[1], dim=0)) == [[0.0], [1.0, 2.0, 3.0, 4.0]]
    with pytest.raises(TypeError, match="tensor_split"):
        tg.tensor_split(x)


@pytest.mark.parametrize("make", [
    lambda x: tg.flip(x, (0,)), lambda x: x.rot90(1, (1, 2)), lambda x: x.roll(1), lambda x: x.repeat(1, 1, 1),
    lambda x: x.tile((1,)), lambda x: tg.tril(x), lambda x: tg.diag(x[0]), lambda x: tg.rot90(x, 0, (1, 2))],
    ids=["flip", "rot90", "roll", "repeat", "tile", "tril", "diag", "rot90_k0"])
def test_copies_do_not_share(make):
    x = _ar(2, 4, 4).requires_grad_()
    y = make(x)
    assert not np.may_share_memory(y._data, x._data)
    z = x * 1.0
    y2 = make(z)
    y2.add_(1.0)                    # (writing to the copy is allowed, and leaves the input alone)
    assert z.tolist() == x.tolist() and z._version == 0


# -- errors ------------------------------------------------------------------------
def _dim_msg(lo, hi, got):
    return "Dimension out of range (expected to be in range of [%d, %d], but got %d)" % (lo, hi, got)


X3 = np.arange(24.0).reshape(2, 3, 4)
V3 = np.arange(3.0)
ERRORS = [
    # (f(module, x3, v3), type, message): PyTorch's, literally
    (lambda m, x, v: x.split(0, 1), RuntimeError,
     "split_size can only be 0 if dimension size is 0, but got dimension size of 3"),
    (lambda m, x, v: x.split(-1, 1), RuntimeError, "split expects split_size be non-negative, but got split_size=-1"),
    (lambda m, x, v: x.split([1, 1], 1), RuntimeError, "split_with_sizes expects split_sizes to sum exactly to 3 "
     "(input tensor's size at dimension 1), but got split_sizes=[1, 1]"),
    (lambda m, x, v: x.split([-1, 4], 1), RuntimeError,
     "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=[-1, 4]"),
    (lambda m, x, v: v[0].split(1), RuntimeError, "split expects at least a 1-dimensional tensor"),
    (lambda m, x, v: x.split(1, 3), IndexError, _dim_msg(-3, 2, 3)),
    (lambda m, x, v: x.chunk(0), RuntimeError, "chunk expects `chunks` to be greater than 0, got: 0"),
    (lambda m, x, v: v[0].chunk(1), RuntimeError, "chunk expects at least a 1-dimensional tensor"),
    (lambda m, x, v: v[0].unbind(), IndexError, "Dimension specified as 0 but tensor has no dimensions"),
    (lambda m, x, v: x.unbind(-4), IndexError, _dim_msg(-3, 2, -4)),
    (lambda m, x, v: x.tensor_split(0), RuntimeError, "number of sections must be larger than 0, got 0"),
    (lambda m, x, v: x.tensor_split(m.tensor([1.0]).float(), 2), RuntimeError,
     "tensor_split expected tensor_indices_or_sections to have dtype of long, but got Float"),
    (lambda m, x, v: x.tensor_split(m.tensor([[1]]), 2), RuntimeError, "tensor_split expected "
     "tensor_indices_or_sections to be a zero-dimensional or one-dimensional tensor, but got a tensor with 2 dims"),
    (lambda m, x, v: v[0].tensor_split(1), RuntimeError,
     "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims"),
    (lambda m, x, v: x.narrow(2, 5, 1), IndexError,
     "start out of range (expected to be in range of [-4, 4], but got 5)"),
    (lambda m, x, v: x.narrow(2, -5, 1), IndexError,
     "start out of range (expected to be in range of [-4, 4], but got -5)"),
    (lambda m, x, v: x.narrow(2, 2, 3), RuntimeError, "start (2) + length (3) exceeds dimension size (4)."),
    (lambda m, x, v: x.narrow(2, 0, -1), RuntimeError, "narrow(): length must be non-negative."),
    (lambda m, x, v: v[0].narrow(0, 0, 1), RuntimeError, "narrow() cannot be applied to a 0-dim tensor."),
    (lambda m, x, v: x.repeat(2, 2), RuntimeError,
     "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"),
    (lambda m, x, v: x.repeat(1, -1, 1), RuntimeError,
     "Trying to create tensor with negative dimension -3: [2, -3, 4]"),
    (lambda m, x, v: x.repeat(), TypeError, 'repeat() missing 1 required positional arguments: "repeats"'),
    (lambda m, x, v: m.tile(x, (-1,)), RuntimeError, "Trying to create tensor with negative dimension -4: [2, 3, -4]"),
    (lambda m, x, v: m.tile(x, 2), TypeError, "tile(): argument 'dims' (position 2) must be tuple of ints, not int"),
    (lambda m, x, v: m.chunk(x, 2.0), TypeError, "chunk(): argument 'chunks' (position 2) must be int, not float"),
    (lambda m, x, v: m.roll(x, (1, 2), 0), RuntimeError, "shifts and dimensions must align. shifts: 2, dims:1"),
    (lambda m, x, v: m.roll(x, 1, (0, 1)), RuntimeError, "shifts and dimensions must align. shifts: 1, dims:2"),
    (lambda m, x, v: m.roll(x, (1, 2)), RuntimeError, "shifts and dimensions must align. shifts: 2, dims:0"),
    (lambda m, x, v: m.roll(x, (), ()), RuntimeError, "`shifts` required"),
    (lambda m, x, v: m.roll(x, 1, 3), IndexError, _dim_msg(-3, 2, 3)),
    (lambda m, x, v: m.roll(v[0], 1, 0), IndexError, "Dimension specified as 0 but tensor has no dimensions"),
    (lambda m, x, v: m.flip(x, 0), TypeError, "flip(): argument 'dims' (position 2) must be tuple of ints, not int"),
    (lambda m, x, v: x.flip(0, -3), RuntimeError, "dim 0 appears multiple times in the list of dims"),
    (lambda m, x, v: x.flip(3), IndexError, _dim_msg(-3, 2, 3)),
    (lambda m, x, v: m.fliplr(v), RuntimeError, "Input must be >= 2-d."),
    (lambda m, x, v: m.flipud(v[0]), RuntimeError, "Input must be >= 1-d."),
    (lambda m, x, v: m.rot90(x, 1, (0, 1, 2)), RuntimeError, "expected total rotation dims == 2, but got dims = 3"),
    (lambda m, x, v: m.rot90(v, 1, (0, 0)), RuntimeError, "expected total dims >= 2, but got total dims = 1"),
    (lambda m, x, v: m.rot90(x, 1, (1, -2)), RuntimeError,
     "expected rotation dims to be different, but got dim0 = 1 and dim1 = -2"),
    (lambda m, x, v: m.rot90(x, 1, (1, 5)), IndexError, _dim_msg(-3, 2, 5)),
    (lambda m, x, v: m.tril(v), RuntimeError, "tril: input tensor must have at least 2 dimensions"),
    (lambda m, x, v: v.triu(), RuntimeError, "triu: input tensor must have at least 2 dimensions"),
    (lambda m, x, v: m.diag(x), RuntimeError, "diag(): Supports 1D or 2D tensors. Got 3D"),
    (lambda m, x, v: m.diag(v[0]), RuntimeError, "diag(): Supports 1D or 2D tensors. Got 0D"),
    (lambda m, x, v: m.diag_embed(x, 0, 1, -3), RuntimeError, "diagonal dimensions cannot be identical 1, -3"),
    (lambda m, x, v: m.diag_embed(v[0]), IndexError, _dim_msg(-1, 0, -2)),
    (lambda m, x, v: m.diag_embed(v, 0, 0, 2), IndexError, _dim_msg(-2, 1, 2)),
    (lambda m, x, v: m.trace(v), RuntimeError, "trace: expected a matrix, but got tensor with dim 1"),
    (lambda m, x, v: m.trace(x), RuntimeError, "trace: expected a matrix, but got tensor with dim 3"),
    (lambda m, x, v: m.trace(m.ones(2, 2, dtype=m.bool)), NotImplementedError, "\"trace\" not implemented for 'Bool'"),
    (lambda m, x, v: m.movedim(x, (0, 1), (2,)), RuntimeError, "movedim: Invalid source or destination dims: source "
     "([0, 1] dims) should contain the same number of dims as destination ([2] dims)"),
    (lambda m, x, v: m.movedim(x, (0, 0), (2, 1)), RuntimeError, "movedim: repeated dim in `source` ([0, 0])"),
    (lambda m, x, v: m.movedim(x, (0, 1), (2, -1)), RuntimeError, "movedim: repeated dim in `destination` ([2, -1])"),
    (lambda m, x, v: m.moveaxis(x, 3, 0), IndexError, _dim_msg(-3, 2, 3)),
    (lambda m, x, v: m.swapaxes(x, 0, 3), IndexError, _dim_msg(-3, 2, 3)),
    (lambda m, x, v: m.vstack([]), RuntimeError, "vstack expects a non-empty TensorList"),
    (lambda m, x, v: m.hstack([]), RuntimeError, "hstack expects a non-empty TensorList"),
    (lambda m, x, v: m.dstack([]), RuntimeError, "dstack expects a non-empty TensorList"),
    (lambda m, x, v: m.column_stack([]), RuntimeError, "column_stack expects a non-empty TensorList"),
    (lambda m, x, v: m.vstack(x), TypeError, "vstack(): argument 'tensors' (position 1) must be tuple of Tensors, "
     "not Tensor"),
    (lambda m, x, v: m.vstack([x, v]), RuntimeError, "Tensors must have same number of dimensions: got 3 and 2"),
    (lambda m, x, v: m.outer(x, v), RuntimeError, "outer: Expected 1-D argument self, but got 3-D"),
    (lambda m, x, v: m.outer(v, v[0]), RuntimeError, "outer: Expected 1-D argument vec2, but got 0-D"),
    (lambda m, x, v: m.outer(v, 2), TypeError, "outer(): argument 'vec2' (position 2) must be Tensor, not int"),
    (lambda m, x, v: m.inner(x, v), RuntimeError, "inner() the last dimension must match on both input tensors but "
     "got shapes [2, 3, 4] and [3]"),
    (lambda m, x, v: m.inner(v, v.float()), RuntimeError, "both inputs should have same dtype"),
    (lambda m, x, v: m.block_diag(v, x), RuntimeError,
     "torch.block_diag: Input tensors must have 2 or fewer dimensions. Input 1 has 3 dimensions"),
    (lambda m, x, v: m.block_diag([v]), TypeError, "expected Tensor as element 0 in argument 0, but got list"),
    (lambda m, x, v: m.cartesian_prod([v, v]), TypeError, "expected Tensor as element 0 in argument 0, but got list"),
    (lambda m, x, v: m.atleast_1d(v, [v]), TypeError, "expected Tensor as element 1 in argument 0, but got list"),
    (lambda m, x, v: m.cartesian_prod(x, v), RuntimeError, "Expect a 1D vector, but got shape [2, 3, 4]"),
    (lambda m, x, v: m.cartesian_prod(v[0], v), RuntimeError, "Expect a 1D vector, but got shape []"),
    (lambda m, x, v: m.cartesian_prod(), RuntimeError, "meshgrid expects a non-empty TensorList"),
    (lambda m, x, v: m.cartesian_prod(v, v.long()), RuntimeError,
     "meshgrid expects all tensors to have the same dtype"),
    (lambda m, x, v: m.meshgrid(v, indexing="foo"), RuntimeError,
     'torch.meshgrid: indexing must be one of "xy" or "ij", but received: foo'),
    (lambda m, x, v: m.meshgrid(indexing="ij"), RuntimeError, "meshgrid expects a non-empty TensorList"),
    (lambda m, x, v: m.meshgrid(v, v.long(), indexing="ij"), RuntimeError,
     "meshgrid expects all tensors to have the same dtype"),
]


def _raised(fn):
    try:
        fn()
    except Exception as e:      # noqa: BLE001  (compared by type and message)
        return type(e), str(e)
    raise AssertionError("did not raise")


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors(case):
    f, kind, msg = ERRORS[case]
    assert _raised(lambda: f(tg, tg.tensor(X3), tg.tensor(V3))) == (kind, msg)


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_match_torch(case):
    torch = pytest.importorskip("torch")
    f, kind, msg = ERRORS[case]
    assert _raised(lambda: f(torch, torch.tensor(X3), torch.tensor(V3))) == (kind, msg)


def test_meshgrid_of_a_matrix_raises():
    # (PyTorch's message prints the tensor in its own format; the start is the same)
    with pytest.raises(RuntimeError, match=r"^torch\.meshgrid: Expected 0D or 1D tensor in the tensor list but got: "):
        tg.meshgrid(tg.zeros(2, 2), indexing="ij")


# -- second derivative, replay -----------------------------------------------------------
def test_create_graph_second_derivative():
    # f = sum(tril(x)^2) + sum(flip(x) * x): df/dx = 2 tril(x) + 2 flip(x) (flip is its own transpose)
    x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (g,) = tg.autograd.grad((tg.tril(x) ** 2).sum() + (tg.flip(x, (0, 1)) * x).sum(), x, create_graph=True)
    assert g.tolist() == [[2.0 + 8.0, 0.0 + 6.0], [6.0 + 4.0, 8.0 + 2.0]]
    (h,) = tg.autograd.grad(g.sum(), x)
    assert h.tolist() == [[4.0, 2.0], [4.0, 4.0]]


def _body(x, v):
    a, b = tg.split(x, [1, 3], 1)
    c = tg.roll(tg.flip(x, (0,)), 1, 1).repeat(1, 2)
    d = tg.tril(tg.rot90(x[:, :3], 1, (0, 1)), -1) * tg.diag(v)
    e = tg.kron(tg.outer(v, v[:2]), x[:1, :2]) + tg.block_diag(x[:1], v[:2])[:, :4].tile((2, 1))[:3]
    f = tg.stack(tg.unbind(tg.movedim(x, 0, 1), 0), 0).narrow(0, 1, 2).swapaxes(0, 1)
    g = tg.inner(x, x[0]) * tg.trace(x[:, :3]) + tg.vstack([v, v]).sum() + tg.diag_embed(x[:, 0]).sum()
    gx, gy = tg.meshgrid(v, v[1:], indexing="xy")
    h = tg.cartesian_prod(v, v[:2]).sum(0) + tg.hstack([v[:1], v[:1]]) + (gx * gy).sum()
    return ((a * b[:, :1]).sum() + (c ** 2).sum() + d.sum() + (e * e).sum() + (f * f).sum() + g.sum()
            + h.sum() + tg.column_stack([v, v]).sum() + tg.dstack([v, v]).sum() + tg.chunk(x, 2, 1)[1].sum()
            + tg.tensor_split(x, 3, 1)[2].sum() + tg.atleast_2d(v).sum())


def _eager(xv, vv):
    x, v = tg.tensor(xv, requires_grad=True), tg.tensor(vv, requires_grad=True)
    out = _body(x, v)
    out.backward()
    return out.item(), x.grad.numpy(), v.grad.numpy()


def test_compile_replays_with_new_inputs():
    cf = tg.compile(_body)
    rng = np.random.default_rng(3)
    for _ in range(3):
        xv, vv = rng.standard_normal((3, 4)), rng.standard_normal(3)
        x, v = tg.tensor(xv, requires_grad=True), tg.tensor(vv, requires_grad=True)
        out = cf(x, v)
        out.backward()
        value, gx, gv = _eager(xv, vv)
        assert out.item() == pytest.approx(value, rel=1e-13)
        np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(v.grad.numpy(), gv, rtol=1e-12, atol=1e-13)
    assert cf.stats.recordings == 1 and cf.stats.replays == 2


def test_record_replays_with_new_inputs():
    rng = np.random.default_rng(4)
    tape = tg.record(_body, rng.standard_normal((3, 4)), rng.standard_normal(3))
    xv, vv = rng.standard_normal((3, 4)), rng.standard_normal(3)
    value, (gx, gv) = tape.value_and_grad(xv, vv)
    ev, ex, ew = _eager(xv, vv)
    assert value == pytest.approx(ev, rel=1e-13)
    np.testing.assert_allclose(gx, ex, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(gv, ew, rtol=1e-12, atol=1e-13)


def test_saved_tape_file_replays(tmp_path):
    rng = np.random.default_rng(5)
    tg.record(_body, rng.standard_normal((3, 4)), rng.standard_normal(3)).save(str(tmp_path / "shapes.npz"))
    tape = tg.load_tape(str(tmp_path / "shapes.npz"))
    xv, vv = rng.standard_normal((3, 4)), rng.standard_normal(3)
    value, (gx, gv) = tape.value_and_grad(xv, vv)
    ev, ex, ew = _eager(xv, vv)
    assert value == pytest.approx(ev, rel=1e-13)
    np.testing.assert_allclose(gx, ex, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(gv, ew, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("sl", [slice(1, None), slice(None, -1), slice(None, None, 2), slice(5, 2),
                                slice(-100, 100), slice(1, 3, 4)])
def test_a_single_slice_is_the_same_as_through_the_general_index(sl):
    """``x[a:b:c]`` (read without the general index walk) gives what ``x[(a:b:c,)]``
    gives: values, a view sharing x's version, grad_fn, gradient."""
    xv = np.arange(12.0).reshape(4, 3)
    got, want = [], []
    for spelled, out in ((lambda x: x[sl], got), (lambda x: x[(sl,)], want)):
        x = tg.tensor(xv, requires_grad=True)
        y = spelled(x)
        out += [y.detach().numpy().copy(), y.grad_fn.name(), y._ver is x._ver]
        (y * tg.tensor(np.arange(y.numel(), dtype=float).reshape(y.shape))).sum().backward()
        out.append(x.grad.numpy())
    np.testing.assert_array_equal(got[0], xv[sl])
    assert got[1] == want[1] == "SliceBackward0"
    assert got[2] and want[2]
    np.testing.assert_array_equal(got[3], want[3])
    x = tg.tensor(xv)
    for bad, msg in ((slice(None, None, 0), "slice step cannot be zero"), (slice(None, None, -1), "step must be")):
        with pytest.raises(ValueError, match=msg):
            x[bad]
