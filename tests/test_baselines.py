"""The sparse baselines: IVM = KLR with every point imported, a monotone objective, the half-thresholding operator
against brute force, l1/2-KLR's monotone objective, and clear errors."""
import pickle
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning

from klrlab.baselines import HalfThresholdingKLR, ImportVectorMachine, half_threshold
from klrlab.klr import KernelLogisticRegression


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(160, 4, n_informative=3, n_redundant=0, flip_y=0.05, random_state=0)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    return X[:100], y[:100], X[100:], y[100:]


@pytest.mark.parametrize("C", [0.5, 5.0])
def test_ivm_with_every_point_is_klr(data, C):
    X, y, Xt, _ = data
    ivm = ImportVectorMachine(C=C, gamma=0.5, tol=0.0).fit(X, y)
    klr = KernelLogisticRegression(C=C, gamma=0.5, tol=1e-10).fit(X, y)
    assert ivm.n_import_ >= 0.9 * len(y)              # tol = 0: import until a point no longer lowers H at all
    np.testing.assert_allclose(ivm.decision_function(Xt), klr.decision_function(Xt), atol=1e-6)
    assert np.all(np.diff(ivm.objective_path_) <= 1e-9 * np.abs(ivm.objective_path_[1:]))


def test_ivm_stops_early_and_stays_accurate(data):
    X, y, Xt, yt = data
    ivm = ImportVectorMachine(C=2.0, gamma=0.5).fit(X, y)
    klr = KernelLogisticRegression(C=2.0, gamma=0.5).fit(X, y)
    assert ivm.n_import_ < len(y) / 2 and ivm.support_fraction_ == ivm.n_import_ / len(y)
    assert ivm.score(Xt, yt) >= klr.score(Xt, yt) - 0.1
    p = ivm.predict_proba(Xt)
    assert np.allclose(p.sum(1), 1) and np.array_equal(ivm.predict(Xt) == ivm.classes_[1], p[:, 1] > 0.5)
    assert np.array_equal(pickle.loads(pickle.dumps(ivm)).decision_function(Xt), ivm.decision_function(Xt))


@pytest.mark.parametrize("mu", [0.05, 0.7, 2.0])
def test_half_threshold_is_the_exact_prox(mu):
    for z in np.linspace(-5, 5, 81):
        f = lambda x: 0.5 * (x - z) ** 2 + mu * np.sqrt(abs(x))
        brute = min([0.0, minimize_scalar(f, bounds=(min(0, z) - 1, max(0, z) + 1), method="bounded", options=dict(xatol=1e-12)).x], key=f)
        assert f(half_threshold(np.array([z]), mu)[0]) <= f(brute) + 1e-9


def test_half_thresholding_klr_descends_and_sparsifies(data):
    X, y, Xt, yt = data
    fracs = []
    for C in (0.05, 20.0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            m = HalfThresholdingKLR(C=C, gamma=0.5, max_iter=2000).fit(X, y)
        path = np.array(m.objective_path_)
        assert np.all(np.diff(path) <= 1e-9 * np.abs(path[1:]))
        fracs.append(m.support_fraction_)
    assert fracs[0] < fracs[1]
    with pytest.warns(ConvergenceWarning, match="max_iter=3"):
        HalfThresholdingKLR(C=20.0, gamma=0.5, max_iter=3).fit(X, y)


@pytest.mark.parametrize("Model", [ImportVectorMachine, HalfThresholdingKLR])
def test_bad_input(Model, data):
    X, y, _, _ = data
    with pytest.raises(ValueError, match="'C' parameter"):
        Model(C=0.0).fit(X, y)
    with pytest.raises(ValueError, match="binary classifier"):
        Model().fit(X, np.arange(len(y)) % 3)
    with pytest.raises(ValueError, match="NaN"):
        Model().fit(np.where(X > 0.9, np.nan, X), y)


@pytest.mark.parametrize("n", [1, 2, 3, 50, 400])
def test_bordered_norm_matches_the_svd(n):
    from klrlab.baselines import bordered_norm_squared
    from klrlab.kernels import Kernel
    K = Kernel("rbf", gamma=2.0)(np.random.default_rng(n).normal(size=(n, 3)))
    exact = np.linalg.norm(np.c_[K, np.ones(n)], 2) ** 2
    assert abs(bordered_norm_squared(K) - exact) <= 1e-12 * exact
