"""TemperatureScaled: predict unchanged, probabilities consistent with it, overconfidence repaired, clear errors."""
import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from klrlab.calibration import TemperatureScaled
from klrlab.klr import KernelLogisticRegression

from conftest import problem


def test_temperature_scaling_keeps_predict_and_repairs_overconfidence():
    X, y = problem(12, n=300, imbalance=0.35)
    Xt, yt = X[200:], y[200:]
    X, y = X[:200], y[:200]
    base = KernelLogisticRegression.from_preset("S-KLR-2ord", C=1e3, lam=300.0, gamma=0.5)
    scaled = TemperatureScaled(base).fit(X, y)
    raw = base.fit(X, y)
    assert scaled.temperature_ > 1                                        # the raw model is overconfident
    assert np.array_equal(scaled.predict(Xt), raw.predict(Xt))
    p = scaled.predict_proba(Xt)
    assert np.allclose(p.sum(1), 1) and np.array_equal(p[:, 1] > 0.5, raw.decision_function(Xt) > 0)
    nll = lambda P: -np.mean(np.log(np.where(yt > 0, P[:, 1], P[:, 0])))
    assert nll(p) < nll(raw.predict_proba(Xt))
    with pytest.raises(ValueError, match="'cv' parameter"):
        TemperatureScaled(base, cv=1).fit(X, y)


def test_the_temperature_minimises_the_out_of_fold_log_loss():
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    X, y = problem(12, n=200, imbalance=0.35)
    base = KernelLogisticRegression.from_preset("S-KLR-2ord", C=1e3, lam=300.0, gamma=0.5)
    scaled = TemperatureScaled(base, cv=4, random_state=1).fit(X, y)
    folds = StratifiedKFold(4, shuffle=True, random_state=1)               # the folds fit uses
    f = cross_val_predict(base, X, y, cv=folds, method="decision_function")
    log_loss = lambda T: np.mean(np.logaddexp(0.0, -y * f / T))         # independent of the fit's formula
    grid = np.exp(np.linspace(-7, 7, 4001))
    best = grid[np.argmin([log_loss(T) for T in grid])]
    assert 1 < best < grid[-1] and scaled.temperature_ == pytest.approx(best, rel=0.02)
    assert log_loss(scaled.temperature_) <= log_loss(best) + 1e-9 < log_loss(1.0)


def test_temperature_scaling_is_a_checked_estimator():
    from sklearn.exceptions import NotFittedError
    X, y = problem(15, n=90)
    with pytest.raises(NotFittedError):
        TemperatureScaled().predict(X)
    assert TemperatureScaled(cv=np.int64(3)).fit(X, y).temperature_ > 0          # any integer type is an integer
    for bad in (True, 2.5, 1):
        with pytest.raises(ValueError, match="'cv' parameter"):
            TemperatureScaled(cv=bad).fit(X, y)
    with pytest.raises(ValueError, match="Only binary classification is supported"):
        TemperatureScaled().fit(np.r_[X, X[:5]], np.r_[y, [2.0] * 5])


# a wrapped precomputed-kernel estimator refuses what test_klr's PRECOMPUTED_FAILURES lists, and its folds need classes
WRAPPED_PRECOMPUTED_FAILURES = {
    "check_positive_only_tag_during_fit": "its matrix has negative entries and is not PSD: refused as a kernel",
    "check_estimators_dtypes": "it truncates a Gram matrix to integers, which is not PSD: refused as a kernel",
    "check_decision_proba_consistency": "it predicts from a (n, 2) feature matrix, not a kernel (SVC fails it too)",
    "check_fit2d_1feature": "its ten-point target leaves a temperature fold with one class, which is refused",
}


def _expected_failures(estimator) -> dict:
    return WRAPPED_PRECOMPUTED_FAILURES if estimator.estimator.kernel == "precomputed" else {}


@parametrize_with_checks([TemperatureScaled(KernelLogisticRegression(), cv=3),
                          TemperatureScaled(KernelLogisticRegression(kernel="precomputed"), cv=3)],
                         expected_failed_checks=_expected_failures)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_a_frame_keeps_its_feature_names_for_the_wrapped_estimator():
    import warnings
    import pandas as pd
    X, y = problem(15, n=90)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    scaled = TemperatureScaled(KernelLogisticRegression(gamma=0.5), cv=3).fit(frame, y)
    assert list(scaled.estimator_.feature_names_in_) == list(frame.columns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaled.predict_proba(frame)


def test_a_wrapped_precomputed_kernel_is_split_by_rows_and_columns():
    from sklearn.model_selection import cross_val_score
    from klrlab.kernels import rbf_kernel
    X, y = problem(16, n=120)
    wrapped = lambda kernel: TemperatureScaled(KernelLogisticRegression(kernel=kernel, gamma=0.5), cv=3)
    on_matrix = cross_val_score(wrapped("precomputed"), rbf_kernel(X, gamma=0.5), y, cv=3)
    on_points = cross_val_score(wrapped("rbf"), X, y, cv=3)
    np.testing.assert_allclose(on_matrix, on_points)


def test_sparse_input_passes_through_to_a_wrapped_estimator_that_takes_it():
    import scipy.sparse as sp
    from sklearn.datasets import make_classification
    from klrlab import SparseSVC
    X, y = make_classification(n_samples=200, n_features=10, random_state=0)
    on_sparse = TemperatureScaled(SparseSVC(), random_state=0).fit(sp.csr_matrix(X), y)
    on_dense = TemperatureScaled(SparseSVC(), random_state=0).fit(X, y)
    assert on_sparse.temperature_ == pytest.approx(on_dense.temperature_, rel=1e-9)
    np.testing.assert_allclose(on_sparse.predict_proba(sp.csr_matrix(X)), on_dense.predict_proba(X), atol=1e-12)
    with pytest.raises(TypeError, match="dense data is required"):       # KLR takes dense X only
        TemperatureScaled().fit(sp.csr_matrix(X), y)


class ScaledDecisions(KernelLogisticRegression):
    "KLR whose decision values are multiplied by `factor`: the same classifier in other units."

    def __init__(self, factor=1.0, gamma=0.5):
        super().__init__(gamma=gamma)
        self.factor = factor

    def decision_function(self, X):
        return self.factor * super().decision_function(X)


@pytest.mark.parametrize("factor", [1e-6, 1e-4, 1e4, 1e8])
def test_the_temperature_follows_the_units_of_the_decision_values(factor):
    # sigma(f / T) is unchanged when f and T scale together: the fitted T must scale with f, however large or small
    X, y = problem(4, n=200, imbalance=0.4)
    plain = TemperatureScaled(ScaledDecisions(1.0), cv=4).fit(X, y)
    scaled = TemperatureScaled(ScaledDecisions(factor), cv=4).fit(X, y)
    assert scaled.temperature_ == pytest.approx(factor * plain.temperature_, rel=1e-5)
    assert np.allclose(scaled.predict_proba(X), plain.predict_proba(X), rtol=1e-5, atol=1e-9)


def test_the_temperature_is_the_least_held_out_log_loss_for_a_model_in_large_units():
    # a Perceptron on features in the thousands: decision values near 1e8; an independent 1-D convex fit of the slope
    # u = 1 / T (no bounds) gives the temperature
    from scipy.optimize import minimize_scalar
    from sklearn.linear_model import Perceptron
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    X, y = problem(0, n=200, imbalance=0.5)
    X = 1000 * X + 5000
    scaled = TemperatureScaled(Perceptron(random_state=0), cv=5, random_state=0).fit(X, y)
    f = cross_val_predict(Perceptron(random_state=0), X, y, cv=StratifiedKFold(5, shuffle=True, random_state=0),
                          method="decision_function")
    scale = np.median(np.abs(f))
    loss = lambda u: np.mean(np.logaddexp(0.0, -y * f * u / scale))
    u = minimize_scalar(loss, bracket=(0.1, 1.0), tol=1e-12).x
    assert u > 0 and scaled.temperature_ == pytest.approx(scale / u, rel=1e-4)


def test_separated_held_out_values_fit_platt_targets_and_warn():
    "No finite least log-loss: T is fitted to Platt's smoothed targets, checked against a direct minimisation."
    from scipy.optimize import minimize_scalar
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    X = np.r_[np.zeros((20, 1)), np.ones((20, 1))] + 0.01 * np.arange(40)[:, None]
    y = np.r_[-np.ones(20), np.ones(20)]
    estimator = KernelLogisticRegression(C=10.0, gamma=1.0)
    with pytest.warns(UserWarning, match="separate the classes.*Platt's smoothed targets"):
        scaled = TemperatureScaled(estimator, cv=4).fit(X, y)
    f = cross_val_predict(estimator, X, y, cv=StratifiedKFold(4, shuffle=True, random_state=0),
                          method="decision_function")
    assert np.all(y * f > 0)                                   # the held-out values do separate the classes
    target = 21 / 22                                           # (N + 1) / (N + 2), N = 20 points per class
    loss = lambda log_u: np.mean(target * np.logaddexp(0.0, -y * f * np.exp(log_u))
                                 + (1 - target) * np.logaddexp(0.0, y * f * np.exp(log_u)))
    log_u = minimize_scalar(loss, bounds=(-20.0, 20.0), method="bounded", options=dict(xatol=1e-10)).x
    assert scaled.temperature_ == pytest.approx(np.exp(-log_u), rel=1e-5)
    p = scaled.predict_proba(X)
    assert np.all((p > 0) & (p < 1))                           # never certainty


def test_platt_targets_are_the_smoothed_class_frequencies():
    from klrlab.calibration import platt_targets
    sign = np.array([1.0, 1.0, 1.0, -1.0])
    np.testing.assert_allclose(platt_targets(sign), [4 / 5, 4 / 5, 4 / 5, 2 / 3])


def test_held_out_values_without_sign_of_the_classes_warn_that_t_grows():
    from klrlab.calibration import fit_temperature
    f = np.array([1.0, -2.0, 0.5, -0.5])
    with pytest.warns(UserWarning, match="no sign of the classes"):
        T = fit_temperature(f, np.array([-1.0, 1.0, 1.0, -1.0]))          # margins -1, -2, 0.5, 0.5: mean < 0
    assert T > 1e10 * np.median(np.abs(f))


def test_log_probabilities_are_exact_where_probabilities_round_to_zero():
    X, y = problem(0, n=80)
    scaled = TemperatureScaled(KernelLogisticRegression(kernel="linear"), cv=3).fit(X, y)
    far = X[:3] * 1e6                                          # linear decision values far from zero
    np.testing.assert_allclose(np.exp(scaled.predict_log_proba(X)), scaled.predict_proba(X), rtol=1e-12)
    z = scaled.decision_function(far) / scaled.temperature_
    assert np.abs(z).min() > 800                               # exp(-|z|) underflows to 0
    expected = np.column_stack([-np.logaddexp(0, z), -np.logaddexp(0, -z)])
    np.testing.assert_allclose(scaled.predict_log_proba(far), expected, rtol=1e-12)


def test_a_splitter_gives_the_folds_an_integer_cv_would():
    from sklearn.model_selection import GroupKFold, ShuffleSplit, StratifiedKFold
    X, y = problem(15, n=90)
    base = KernelLogisticRegression(gamma=0.5)
    by_int = TemperatureScaled(base, cv=4, random_state=2).fit(X, y)
    by_splitter = TemperatureScaled(base, cv=StratifiedKFold(4, shuffle=True, random_state=2)).fit(X, y)
    assert by_splitter.temperature_ == by_int.temperature_
    grouped = TemperatureScaled(base, cv=GroupKFold(3)).fit(X, y, groups=np.arange(len(y)) % 6)
    assert grouped.temperature_ > 0
    with pytest.raises(ValueError, match="partition"):                    # out-of-fold values need every point once
        TemperatureScaled(base, cv=ShuffleSplit(3, random_state=0)).fit(X, y)
    with pytest.raises(ValueError, match="'cv' parameter"):
        TemperatureScaled(base, cv="5").fit(X, y)
