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


@parametrize_with_checks([TemperatureScaled(KernelLogisticRegression(), cv=3)])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
