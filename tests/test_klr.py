import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.utils.estimator_checks import parametrize_with_checks

from klrlab import KernelLogisticRegression
from klrlab.datasets import make_keerthi_gaussians, make_twonorm
from klrlab.kernels import Kernel, rbf_kernel


@pytest.fixture(scope="module")
def gauss():
    X, y, Xt, yt = make_keerthi_gaussians(200, 500, seed=0)
    return X, y, Xt, yt


@parametrize_with_checks([KernelLogisticRegression(), KernelLogisticRegression(kernel="linear", wss="first"),
                          KernelLogisticRegression(kernel="laplacian")])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_linear_kernel_is_sklearn_logistic_regression():
    X, y = make_twonorm(300, n_features=5, seed=1)
    klr = KernelLogisticRegression(C=0.7, kernel="linear", tol=1e-11).fit(X, y)
    lr = LogisticRegression(C=0.7, tol=1e-13, max_iter=100_000).fit(X, y)
    np.testing.assert_allclose(klr.dual_coef_[0] @ klr.support_vectors_, lr.coef_[0], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(klr.intercept_, lr.intercept_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(klr.predict_proba(X), lr.predict_proba(X), atol=1e-7)


def test_fitted_attributes_and_certificate(gauss):
    X, y, _, _ = gauss
    clf = KernelLogisticRegression(C=2.0, gamma=0.5, tol=1e-7).fit(X, y)
    assert clf.converged_ and clf.kkt_violation_ <= clf.tol_ == 1e-7
    assert clf.dual_coef_.shape == (1, 200) and list(clf.support_) == list(range(200))  # KLR is not sparse
    assert clf.n_kernel_evals_ > 0 and clf.n_iter_ > 0 and np.isfinite(clf.objective_)
    assert np.all(np.abs(clf.dual_coef_) < 2.0)  # 0 < alpha < C


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), C=st.floats(0.01, 100.0), gamma=st.floats(0.01, 10.0))
def test_predict_proba_always_agrees_with_predict(seed, C, gamma):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, 2))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=40) > 0, "yes", "no")
    y[:2] = ["yes", "no"]
    clf = KernelLogisticRegression(C=C, gamma=gamma).fit(X, y)
    Xt = rng.normal(size=(100, 2)) * 3
    P = clf.predict_proba(Xt)
    assert np.allclose(P.sum(1), 1) and np.all((P >= 0) & (P <= 1))
    assert np.array_equal(clf.classes_[np.argmax(P, axis=1)], clf.predict(Xt))
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(Xt)), P, rtol=1e-12, atol=1e-300)


def test_log_proba_does_not_underflow():
    X = np.array([[0.0], [0.1], [10.0], [10.1]])
    clf = KernelLogisticRegression(C=1e4, gamma=1.0).fit(X, [0, 0, 1, 1])
    far = np.array([[1e3]])
    logp = clf.predict_log_proba(far)
    assert np.all(np.isfinite(logp))


def test_multiclass_one_vs_rest(gauss):
    X, y, _, _ = gauss
    rng = np.random.default_rng(2)
    X3 = np.r_[X, rng.normal([0, 6], 1, (60, 2))]
    y3 = np.r_[np.where(y > 0, "a", "b"), ["c"] * 60]
    clf = KernelLogisticRegression(gamma=0.5).fit(X3, y3)
    P = clf.predict_proba(X3)
    assert P.shape == (260, 3) and np.allclose(P.sum(1), 1)
    assert np.array_equal(clf.classes_[P.argmax(1)], clf.predict(X3)) and (clf.predict(X3) == y3).mean() > 0.9
    assert clf.n_iter_.shape == (3,) and clf.converged_.all()


def test_precomputed_kernel_matches(gauss):
    X, y, Xt, _ = gauss
    a = KernelLogisticRegression(C=1.0, gamma=0.5, tol=1e-9).fit(X, y)
    b = KernelLogisticRegression(C=1.0, kernel="precomputed", tol=1e-9).fit(rbf_kernel(X, gamma=0.5), y)
    np.testing.assert_allclose(b.decision_function(rbf_kernel(Xt, X, gamma=0.5)), a.decision_function(Xt), atol=1e-8)


def test_warm_start_along_C(gauss):
    X, y, _, _ = gauss
    cold = KernelLogisticRegression(C=2.0, gamma=0.5).fit(X, y)
    warm = KernelLogisticRegression(C=1.0, gamma=0.5, warm_start=True).fit(X, y)
    warm.set_params(C=2.0).fit(X, y)
    assert warm.n_iter_ < cold.n_iter_
    np.testing.assert_allclose(warm.decision_function(X), cold.decision_function(X), atol=1e-4)


def test_convergence_warning_names_the_measure(gauss):
    X, y, _, _ = gauss
    with pytest.warns(ConvergenceWarning, match=r"did not converge in 3 iterations: kkt_violation = .* \(> tol"):
        clf = KernelLogisticRegression(max_iter=3).fit(X, y)
    assert not clf.converged_


@pytest.mark.parametrize("params,X_transform,y_transform,error,match", [
    (dict(C=0.0), None, None, ValueError, "'C' parameter"),
    (dict(C=-1.0), None, None, ValueError, "'C' parameter"),
    (dict(wss="best"), None, None, ValueError, "'wss' parameter"),
    (dict(lam=-0.1), None, None, ValueError, "'lam' parameter"),
    (dict(lam="C/9"), None, None, ValueError, "'lam' parameter"),
    (dict(bound_eps=0.6), None, None, ValueError, "bound_eps=0.6"),
    (dict(bound_eps=0.6, bound_eps_mode="absolute"), None, None, ValueError, "bound_eps=0.6 with bound_eps_mode='absolute'"),
    (dict(bound_eps_mode="percent"), None, None, ValueError, "'bound_eps_mode' parameter"),
    (dict(C=1e-4, lam=1e-5, bound_eps=1e-5, bound_eps_mode="absolute"), None, lambda y: np.where(np.arange(len(y)) < 5, -1.0, 1.0),
     ValueError, "infeasible"),
    (dict(), lambda X: np.where(X > 2, np.nan, X), None, ValueError, "NaN"),
    (dict(), lambda X: np.where(X > 2, np.inf, X), None, ValueError, "infinity"),
    (dict(), None, lambda y: np.ones_like(y), ValueError, "at least 2 classes"),
    (dict(kernel="precomputed"), lambda X: -rbf_kernel(X), None, ValueError, "not positive semidefinite"),
    (dict(kernel="precomputed"), lambda X: X, None, ValueError, "square"),
])
def test_bad_input(gauss, params, X_transform, y_transform, error, match):
    X, y, _, _ = gauss
    X = X_transform(X) if X_transform else X
    y = y_transform(y) if y_transform else y
    with pytest.raises(error, match=match):
        KernelLogisticRegression(**params).fit(X, y)


def test_pickle_and_determinism(gauss):
    X, y, Xt, _ = gauss
    a = KernelLogisticRegression(gamma=0.5).fit(X, y)
    b = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(a.predict_proba(Xt), b.predict_proba(Xt))
    np.testing.assert_array_equal(KernelLogisticRegression(gamma=0.5).fit(X, y).predict_proba(Xt), a.predict_proba(Xt))


def test_klr_probabilities_near_bayes_on_keerthis_problem():
    X, y, Xt, yt = make_keerthi_gaussians(400, 20000, seed=0)
    clf = KernelLogisticRegression(C=1.0, gamma=0.5).fit(X, y)
    error = np.mean(clf.predict(Xt) != yt)
    assert error < 0.06  # Bayes error 0.046; the paper's tuned KLR 0.0502


def test_keerthi_scheme_in_the_estimator(gauss):
    X, y, Xt, _ = gauss
    a = KernelLogisticRegression(C=10.0, gamma=0.5, wss="first", tol=1e-8).fit(X, y)
    b = KernelLogisticRegression(C=10.0, gamma=0.5, wss="first", tol=1e-8, scheme="keerthi").fit(X, y)
    assert b.converged_ and b.solver_results_[0].info["scheme"] == "keerthi"
    np.testing.assert_allclose(b.decision_function(Xt), a.decision_function(Xt), atol=1e-5)
    with pytest.raises(ValueError, match="wss='first'"):
        KernelLogisticRegression(scheme="keerthi").fit(X, y)   # the default wss is 'second'


def test_warm_start_keeps_the_kernel_cache(gauss):
    X, y, _, _ = gauss
    cold = KernelLogisticRegression(C=2.0, gamma=0.5, lam=0.3).fit(X, y)
    kept = KernelLogisticRegression(C=1.0, gamma=0.5, warm_start="kernel").fit(X, y)
    first_evals = kept.n_kernel_evals_
    kept.set_params(C=2.0, lam=0.3).fit(X, y)
    assert first_evals >= len(y) ** 2 and kept.n_kernel_evals_ == 0      # every row came from the kept cache
    np.testing.assert_array_equal(kept.dual_coef_, cold.dual_coef_)      # and alpha restarted cold: the same fit, bit for bit
    assert kept.n_iter_ == cold.n_iter_


def test_kept_cache_is_dropped_when_the_data_change(gauss):
    X, y, _, _ = gauss
    model = KernelLogisticRegression(C=1.0, gamma=0.5, warm_start="kernel").fit(X, y)
    X2 = X.copy()
    X2[0, 0] += 1.0                                                      # same shape, different points
    model.fit(X2, y)
    cold = KernelLogisticRegression(C=1.0, gamma=0.5).fit(X2, y)
    assert model.n_kernel_evals_ > 0
    np.testing.assert_array_equal(model.decision_function(X), cold.decision_function(X))
    X_inplace = X2                                                       # changed in place after the fit: detected too
    model.fit(X_inplace, y)
    X_inplace[1, 1] -= 0.5
    model.fit(X_inplace, y)
    np.testing.assert_array_equal(model.decision_function(X), KernelLogisticRegression(C=1.0, gamma=0.5).fit(X_inplace, y).decision_function(X))


def test_pickle_leaves_the_kernel_cache_out(gauss):
    import pickle
    X, y, _, _ = gauss
    model = KernelLogisticRegression(C=1.0, gamma=0.5, warm_start=True, cache_size=50).fit(X, y)
    clone = pickle.loads(pickle.dumps(model))
    assert "_kept_cache" in model.__dict__ and "_kept_cache" not in clone.__dict__
    np.testing.assert_array_equal(clone.decision_function(X), model.decision_function(X))
    clone.set_params(C=2.0).fit(X, y)                                    # and a warm refit works without it
    assert clone.converged_


def test_warm_start_accepts_only_booleans_and_kernel(gauss):
    X, y, _, _ = gauss
    with pytest.raises(ValueError, match="'warm_start' parameter"):
        KernelLogisticRegression(warm_start="alpha").fit(X, y)


def test_a_numpy_true_warm_start_warm_starts(gauss):
    X, y, _, _ = gauss
    plain = KernelLogisticRegression(C=1.0, gamma=0.5, warm_start=True).fit(X, y)
    plain.set_params(C=2.0).fit(X, y)
    numpy_true = KernelLogisticRegression(C=1.0, gamma=0.5, warm_start=np.True_).fit(X, y)
    numpy_true.set_params(C=2.0).fit(X, y)
    assert numpy_true.n_iter_ == plain.n_iter_
    np.testing.assert_array_equal(numpy_true.dual_coef_, plain.dual_coef_)
