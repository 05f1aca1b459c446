"""Checks that library code makes on values (an error for a bad input, a Python bool it
returns) are guards of a recorded tape: a replay whose input would fail the check, or
decide otherwise, diverges and runs eagerly (which raises, or takes the other branch)
rather than replaying what the recording saw.  Each case: replays of good inputs equal
eager calls, then the bad input raises (or branches) exactly as eager execution."""
import numpy as np
import pytest

import tapegrad as tg

t = tg.tensor
D = tg.distributions
X = t([[1.0, 2.0, 4.0], [0.5, -1.0, 3.0]])
SPD = [t([[2.0, 1.0], [1.0, 3.0]]), t([[4.0, 1.0], [1.0, 2.0]]), t([[3.0, 0.5], [0.5, 2.0]])]
ZERO2 = t([0.0, 0.0])
PIV = tg.linalg.lu_factor(t([[2.0, 1.0], [1.0, 3.0]])).pivots        # (its pivots: no row swap)
B1 = t([[1.0], [1.0]])

CASES = {
    # name: (function, good argument tuples, bad argument tuple, the eager error or None)
    "cov, negative aweights": (lambda w: tg.cov(X, aweights=w), [(t([1.0, 2.0, 0.5]),), (t([0.3, 0.3, 3.0]),)],
                               (t([1.0, -2.0, 0.5]),), "cov\\(\\): aweights cannot be negative"),
    "cov, aweights summing to zero": (lambda w: tg.cov(X, aweights=w), [(t([1.0, 2.0, 0.5]),), (t([2.0, 1.0, 1.0]),)],
                                      (t([0.0, 0.0, 0.0]),), "cov\\(\\): weights sum to zero"),
    "lu_factor of a singular matrix": (lambda A: tg.linalg.lu_factor(A).LU * 2,
                                       [(t([[2.0, 1.0], [1.0, 3.0]]),), (t([[1.0, 2.0], [3.0, 1.0]]),)],
                                       (t([[1.0, 2.0], [2.0, 4.0]]),), "U\\[2,2\\] is zero"),
    "lu_solve after a singular lu_factor": (
        lambda A, piv, B: tg.linalg.lu_solve(tg.linalg.lu_factor(A).LU, piv, B),
        [(A, PIV, B1) for A in (t([[2.0, 1.0], [1.0, 3.0]]), t([[3.0, 1.0], [1.0, 1.0]]))],
        (t([[1.0, 2.0], [2.0, 4.0]]), PIV, B1), "U\\[2,2\\] is zero"),
    "MultivariateNormal, not positive definite": (
        lambda m, c: D.MultivariateNormal(m, covariance_matrix=c, validate_args=False).log_prob(m),
        [(ZERO2, c) for c in SPD], (ZERO2, t([[1.0, 2.0], [2.0, 1.0]])), "not positive-definite"),
    # (their guards are the values compared: a replay only with the same ones)
    "allclose in a branch": (lambda a, b: a * 2 if tg.allclose(a, b) else a * 3,
                             [(t([1.0, 2.0]), t([5.0, 6.0]))], (t([1.0, 2.0]), t([1.0, 2.0])), None),
    "equal in a branch": (lambda a, b: a * 2 if tg.equal(a, b) else a * 3,
                          [(t([1.0, 2.0]), t([5.0, 6.0]))], (t([1.0, 2.0]), t([1.0, 2.0])), None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_value_check_is_a_guard(name):
    fn, goods, bad, error = CASES[name]
    compiled = tg.compile(fn)
    for args in goods + goods:
        np.testing.assert_allclose(compiled(*args).numpy(), fn(*args).numpy(), rtol=1e-13)
    assert compiled.stats.replays >= len(goods) and compiled.stats.divergences == 0
    if error is None:       # (the other branch: twice the input, where the recording took three times)
        np.testing.assert_allclose(compiled(*bad).numpy(), 2 * bad[0].numpy(), rtol=1e-15)
        np.testing.assert_allclose(fn(*bad).numpy(), 2 * bad[0].numpy(), rtol=1e-15)
    else:
        with pytest.raises(RuntimeError, match=error):
            fn(*bad)
        with pytest.raises(RuntimeError, match=error):
            compiled(*bad)
    assert compiled.stats.divergences >= 1
