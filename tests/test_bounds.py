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
