"""TemperatureScaled: predict unchanged, probabilities consistent with it, overconfidence repaired, clear errors."""
import numpy as np
import pytest

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
    with pytest.raises(ValueError, match="cv=1"):
        TemperatureScaled(base, cv=1).fit(X, y)
