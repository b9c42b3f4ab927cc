"""The dual problems' definitions: boxes and their lower bound, feasible starts, the I_up / I_low sets, the scores and
the certificate, warm-start rescaling, and the logistic data term."""
import numpy as np
import pytest

from klrlab.dual import (KEERTHI_MU, SPARSE_BOUND, box, feasible_alpha, initial_alpha, kkt_violation, logistic_terms,
                         low_mask, lower_bound, rescale_alpha, up_mask)
from klrlab.kernels import Kernel
from klrlab.reference import reference_smo


def test_feasible_alpha_repairs_any_start():
    rng = np.random.default_rng(0)
    y = np.where(rng.random(50) < 0.3, 1.0, -1.0)
    for _ in range(20):
        a = feasible_alpha(rng.uniform(-1, 3, 50), y, 0.01, 1.99)
        assert abs(a @ y) < 1e-12 and a.min() >= 0.01 and a.max() <= 1.99


def test_infeasible_box_is_a_clear_error():
    y = np.r_[np.ones(99), -np.ones(1)]
    with pytest.raises(ValueError, match="infeasible"):
        initial_alpha(y, 0.1, 0.05, 1.0)


def test_boxes_and_the_lower_bound_convention():
    assert box("hinge", 3.0) == (0.0, 3.0) and box("logistic", 3.0) == (KEERTHI_MU * 3.0, 3.0 - KEERTHI_MU * 3.0)
    assert lower_bound(50.0, 0.0) is None                                    # plain KLR: the engine's negligible bound
    assert lower_bound(50.0, 5.0) == SPARSE_BOUND * 50.0                      # sparse KLR: relative by default
    assert lower_bound(50.0, 5.0, 1e-5, "absolute") == 1e-5 and lower_bound(50.0, 0.0, 0.1) == 5.0
    with pytest.raises(ValueError, match=r"bound_eps=30.0 with bound_eps_mode='absolute' .* \(0, C/2\)"):
        lower_bound(50.0, 5.0, 30.0, "absolute")
    with pytest.raises(ValueError, match="bound_eps=2.0"):
        box("logistic", 3.0, 2.0)


def test_up_and_low_sets_are_the_directions_each_point_can_move():
    y = np.array([1.0, 1.0, 1.0, -1.0, -1.0, -1.0])
    alpha = np.array([0.0, 0.5, 1.0, 0.0, 0.5, 1.0])
    assert list(up_mask(y, alpha, 0.0, 1.0)) == [True, True, False, False, True, True]
    assert list(low_mask(y, alpha, 0.0, 1.0)) == [False, True, True, True, True, False]


def test_the_certificate_is_zero_exactly_at_the_optimum():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 2)); y = np.where(X[:, 0] > 0, 1.0, -1.0)
    K = Kernel("rbf", gamma=0.5)(X)
    lo, hi = box("logistic", 2.0)
    ref = reference_smo(K, y, 2.0, lo=lo, hi=hi, tol=1e-12, alpha0=initial_alpha(y, lo, hi, 2.0))
    gap, s = kkt_violation("logistic", y, ref["alpha"], K @ (ref["alpha"] * y), 2.0, 0.0, lo, hi)
    assert 0 <= gap <= 1e-12 and np.ptp(s) <= 1e-12                          # every alpha is free: one common score
    start = initial_alpha(y, lo, hi, 2.0)
    assert kkt_violation("logistic", y, start, K @ (start * y), 2.0, 0.0, lo, hi)[0] > 1e-3


def test_rescaling_keeps_alpha_over_C():
    alpha = np.array([0.2, 0.4])
    np.testing.assert_array_equal(rescale_alpha(alpha, 2.0, 10.0) / 10.0, alpha / 2.0)


def test_logistic_terms_match_finite_differences_and_stay_finite():
    rng = np.random.default_rng(2)
    f, y = rng.normal(size=20) * 5, np.where(rng.random(20) > 0.5, 1.0, -1.0)
    loss, r, w = logistic_terms(f, y, 3.0)
    h = 1e-6
    for i in range(20):
        e = np.zeros(20); e[i] = h
        assert abs((logistic_terms(f + e, y, 3.0)[0] - logistic_terms(f - e, y, 3.0)[0]) / (2 * h) - r[i]) < 1e-6
        assert abs((logistic_terms(f + e, y, 3.0)[1][i] - logistic_terms(f - e, y, 3.0)[1][i]) / (2 * h) - w[i]) < 1e-6
    assert all(np.all(np.isfinite(part)) for part in logistic_terms(np.array([1e4, -1e4]), np.array([1.0, 1.0]), 1.0))


@pytest.mark.parametrize("alpha0, what", [(np.r_[np.nan, np.full(39, 0.5)], "non-finite"),
                                          (np.full(40, np.nan), "non-finite"), (np.full(39, 0.5), "shape")])
def test_a_warm_start_that_is_not_one_finite_value_per_sample_is_refused(alpha0, what):
    # a NaN survived the clipping and the compiled certificate then read -inf (or 0): 'converged' with NaN alphas
    from klrlab.kernels import Kernel
    from klrlab.solvers.smo import solve_dual
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=40) > 0, 1.0, -1.0)
    with pytest.raises(ValueError, match="alpha0: a start needs one finite value per sample"):
        solve_dual(Kernel("rbf", gamma=0.5).cache(X), y, 1.0, lam=0.1, alpha0=alpha0)
