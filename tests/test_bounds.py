"""Consolo et al.'s bound (21) on lambda: at the bound every minority-class alpha sits at its upper bound."""
import pytest

from klrlab.bounds import lambda_upper_bound
from klrlab.kernels import Kernel
from klrlab.klr import KernelLogisticRegression

from conftest import problem


@pytest.mark.parametrize("C", [1.0, 10.0])
def test_proposition_1_bound(C):
    X, y = problem(10, n=60, imbalance=0.27)
    k = Kernel("rbf", gamma=0.5)
    lam_max = lambda_upper_bound(X, y, C, k)
    model = KernelLogisticRegression(
        C=C, kernel="precomputed", lam=lam_max, bound_eps=1e-5, bound_eps_mode="absolute", tol=1e-8
    )
    alpha = model.fit(k(X), y).solver_results_[0].alpha
    minority = -1.0 if (y < 0).sum() < (y > 0).sum() else 1.0
    assert (alpha[y == minority] >= C - 1e-5 - 1e-9).all()


def test_the_bound_needs_pm1_labels():
    X, y = problem(1, n=30)
    with pytest.raises(ValueError, match=r"labels -1 and \+1"):
        lambda_upper_bound(X, (y > 0).astype(float), 1.0)


def test_the_bound_is_21_over_the_minority_class():
    import numpy as np
    X, y = problem(10, n=60, imbalance=0.27)
    k, C = Kernel("rbf", gamma=0.5), 10.0
    plain = KernelLogisticRegression(C=C, kernel="precomputed", lam=0.0, bound_eps=1e-5, bound_eps_mode="absolute",
                                     tol=1e-8).fit(k(X), y).solver_results_[0]
    minority = y == (-1.0 if (y < 0).sum() <= (y > 0).sum() else 1.0)
    # max over i in I_- of sum_j (C_bar - alpha_j(0)) y_j K_ji, with C_bar = C - gamma
    by_hand = max(np.sum((C - 1e-5 - plain.alpha) * y * k(X)[:, i]) for i in np.flatnonzero(minority))
    assert lambda_upper_bound(X, y, C, k) == pytest.approx(by_hand, rel=1e-6)
