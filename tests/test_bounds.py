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


def test_tied_classes_give_the_same_bound_whichever_label_is_called_minus_one():
    import numpy as np
    X, y = problem(4, n=40, imbalance=0.5)
    assert (y < 0).sum() == (y > 0).sum()
    k = Kernel("rbf", gamma=0.5)
    assert lambda_upper_bound(X, y, 10.0, k) == pytest.approx(lambda_upper_bound(X, -y, 10.0, k), rel=1e-9)


def test_a_bound_no_lambda_can_exceed_warns():
    "Labels unrelated to the points and a narrow kernel: (21) comes out <= 0, and says it gives no guide."
    import numpy as np
    X = np.random.default_rng(0).normal(size=(50, 5))
    y = np.r_[-np.ones(20), np.ones(30)]
    with pytest.warns(RuntimeWarning, match=r"no lambda >= 0 exceeds"):
        assert lambda_upper_bound(X, y, 10.0, Kernel("rbf", gamma=2.0)) <= 0


def test_a_minority_labelled_plus_one_gets_the_bound_of_the_same_data_labelled_minus_one():
    "The paper's (21) is for a minority labelled -1; swapping the labels must not change it (the fit is the same)."
    X, y = problem(10, n=60, imbalance=0.27)
    assert (y < 0).sum() < (y > 0).sum()
    k = Kernel("rbf", gamma=0.5)
    assert lambda_upper_bound(X, -y, 10.0, k) == pytest.approx(lambda_upper_bound(X, y, 10.0, k), rel=1e-6)


@pytest.mark.parametrize("call, error, message", [
    (lambda X, y: lambda_upper_bound(X, y, 0.0), ValueError, r"C=0\.0; accepted: a finite number > 0"),
    (lambda X, y: lambda_upper_bound(X, y, 1.0, bound_eps_mode="abs"), ValueError, r"bound_eps_mode='abs'"),
    (lambda X, y: lambda_upper_bound(X[:, 0], y, 1.0), ValueError, r"X must be a 2-D array"),
    (lambda X, y: lambda_upper_bound(X, y[:-1], 1.0), ValueError, r"one label per row of X"),
    (lambda X, y: lambda_upper_bound(0 * X, y, 1.0), ValueError, r"X has no variance"),
    (lambda X, y: lambda_upper_bound(X, y, 1.0, kernel="rbf"), TypeError, r"kernel='rbf'; accepted: a klrlab"),
])
def test_bad_input_is_refused_by_name(call, error, message):
    X, y = problem(1, n=30)
    with pytest.raises(error, match=message):
        call(X, y)
