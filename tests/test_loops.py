"""kernels/loops.py, the planning both generated programs share (fused replay and the
tangent programs): index maps, loop nests and the shifted sums, run here as plain Python
(the programs run them compiled: tests/test_fuse.py, tests/test_tangent_program.py)."""
import numpy as np
import pytest

from tapegrad.kernels import loops

RNG = np.random.default_rng(45)


def test_affine_finds_offset_and_strides_and_refuses_the_rest():
    grid = np.arange(40).reshape(5, 8)
    m = grid[1:4, 2:7:2].reshape(-1)            # a strided view of a 5 x 8 array
    assert loops.affine(m, (3, 3)) == (10, (8, 2))
    assert loops.affine(np.full(6, 7), (2, 3)) == (7, (0, 0))      # one element, broadcast
    assert loops.affine(np.array([0, 1, 3]), (3,)) is None
    assert loops.affine(np.zeros(0, np.int64), (0, 4)) == (0, (0, 0))
    assert loops.index(10, (8, 2), ("i0", "i1")) == "10 + i0 * 8 + i1 * 2"
    assert loops.index(0, (0, 1), ("i0", "i1")) == "i1"
    assert loops.index(0, (0, 0), ("i0", "i1")) == "0"
    assert loops.c_strides((3, 1, 4)) == (4, 0, 1)


def test_views_chase_to_the_base():
    sizes = {0: 12, 1: 12, 2: 6, 3: 3}
    v = loops.Views(sizes.__getitem__)
    v.add(1, 0)                                 # a reshape
    v.add(2, 1, np.arange(0, 12, 2))            # every other element
    v.add(3, 2, np.array([5, 0, 2]))            # a gather of that
    assert 0 not in v.of
    b, m = v.chase(3)
    assert b == 0 and m.tolist() == [10, 0, 4]
    b, m = v.chase(0)
    assert b == 0 and m.tolist() == list(range(12))


def test_nest_puts_pre_and_post_around_the_innermost_loop():
    lines = loops.nest((2, 3), ["x += 1"], ["a = 0"], ["b = 1"])
    assert lines == ["    for i0 in range(2):", "        a = 0", "        for i1 in range(3):",
                     "            x += 1", "        b = 1"]
    assert loops.nest((), ["x += 1"], ["a = 0"]) == ["    a = 0", "    x += 1"]
    assert loops.nest((4,), ["x += 1"], names=("i",), depth=2)[0] == "        for i in range(4):"


def _run(rows, n, row_len, shifts, in_order, also=None):
    """An array of ``rows`` rows of ``row_len`` added to at ``shifts`` along each row, by
    ``ShiftedSums`` and by one ``+=`` per addition; ``also``: one more addition per
    iteration through another index (the tangent programs' case)."""
    terms = RNG.standard_normal((rows, n, len(shifts))) * 10.0 ** RNG.integers(-8, 8, (rows, n, len(shifts)))
    start = RNG.standard_normal(rows * row_len)
    extra = RNG.standard_normal((rows, n))

    def at(array, shift, last):
        return "i0 * %d + %d + %s" % (row_len, shift, "i1" if last is None else last)
    sums = loops.ShiftedSums(at, in_order)
    body = []
    for j, s in enumerate(shifts):
        body.append(sums.add("A", s, "T[i0, i1, %d]" % j))
        if also is not None and j == 0:
            body.append("A[i0 * %d + %d] += E[i0, i1]" % (row_len, also))
    pre, first, end, post = sums.carry(n)
    src = "def f(A, T, E):\n" + "\n".join(loops.nest((rows, n), first + body + end, pre, post)) + "\n"
    ns = {}
    exec(src, ns)
    got = start.copy()
    ns["f"](got, terms, extra)
    want = start.copy()
    for r in range(rows):
        for i in range(n):
            for j, s in enumerate(shifts):
                want[r * row_len + s + i] += terms[r, i, j]
                if also is not None and j == 0:
                    want[r * row_len + also] += extra[r, i]
    return got, want, src


@pytest.mark.parametrize("shifts", [[0, 1], [1, 0, 1], [0, 2], [2, 0, 3, 3, 1], [0], [1, 1]])
def test_shifted_sums_in_order_are_bitwise_one_addition_each(shifts):
    got, want, src = _run(3, 9, 13, shifts, True)
    assert np.array_equal(got, want), src
    if max(shifts) > min(shifts):
        assert "kA_0" in src and "A[" in src


@pytest.mark.parametrize("shifts", [[0, 1], [2, 0, 3, 1], [0, 3]])
def test_shifted_sums_summed_per_iteration_share_the_array(shifts):
    got, want, src = _run(2, 7, 12, shifts, False, also=11)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14 * np.abs(want).max())


def test_shifted_sums_of_no_iteration_touch_nothing():
    for in_order in (True, False):
        got, want, src = _run(2, 0, 4, [0, 2], in_order)
        assert np.array_equal(got, want) and "A[" not in src


def test_generated_programs_are_bounds_checked_in_the_suite():
    """The suite compiles every generated program with Numba's bounds checks (conftest.py):
    an index outside its array raises instead of reading memory outside it."""
    assert loops.BOUNDSCHECK and "boundscheck=True" in loops.decorator()
    source = ("from tapegrad._jit import jit\n\n\n%s\ndef run(a, i):\n    return a[i]\n" % loops.decorator())
    mod = loops.load("test_oob", source)
    assert mod.run(np.arange(3.0), 2) == 2.0
    with pytest.raises(IndexError):
        mod.run(np.arange(3.0), 7)
