"""The estimators of klrlab.klr: KernelLogisticRegression (plain and sparse, its presets, warm starts, the certificate,
probabilities), ImportVectorMachine and HalfThresholdingKLR (IVM = KLR with every point imported, duplicates imported
once, sampled candidates, l1/2's steps and certificate, the lockstep grid fit), scikit-learn's checks, clear errors."""
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.special import expit
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.utils.estimator_checks import parametrize_with_checks
from threadpoolctl import threadpool_limits

from klrlab import FrankWolfeSVC, HalfThresholdingKLR, ImportVectorMachine, KernelLogisticRegression
from klrlab.datasets import make_keerthi_gaussians, make_twonorm
from klrlab.kernels import Kernel, rbf_kernel
from klrlab.base import ConstantModelWarning
from klrlab.klr import PRESETS, fit_half_thresholding_many
from klrlab.solvers.half_thresholding import half_threshold
from klrlab.solvers.smo import solve_path

from conftest import problem


@pytest.fixture(scope="module")
def gauss():
    X, y, Xt, yt = make_keerthi_gaussians(200, 500, seed=0)
    return X, y, Xt, yt


# What scikit-learn's suite asks of an estimator on a precomputed kernel that a PSD-checking one must refuse
PRECOMPUTED_FAILURES = {
    "check_positive_only_tag_during_fit": "its matrix has negative entries and is not PSD: refused as a kernel",
    "check_estimators_dtypes": "it truncates a Gram matrix to integers, which is not PSD: refused as a kernel",
    "check_decision_proba_consistency": "it predicts from a (n, 2) feature matrix, not a kernel (SVC fails it too)",
}
CV_PRECOMPUTED_FAILURES = {
    **PRECOMPUTED_FAILURES,
    **{check: "its target has classes with fewer points than folds: a fold trains without a class, which is refused"
       for check in ("check_dont_overwrite_parameters", "check_f_contiguous_array_estimator",
                     "check_methods_sample_order_invariance", "check_methods_subset_invariance",
                     "check_fit2d_1feature", "check_dict_unchanged", "check_fit2d_predict1d")},
}


def _expected_failures(estimator) -> dict:
    from klrlab import KernelLogisticRegressionCV
    if getattr(estimator, "kernel", None) != "precomputed": return {}
    return CV_PRECOMPUTED_FAILURES if isinstance(estimator, KernelLogisticRegressionCV) else PRECOMPUTED_FAILURES


def _checked_estimators() -> list:
    from klrlab import KernelLogisticRegressionCV
    return [
        KernelLogisticRegression(),
        KernelLogisticRegression(kernel="linear", wss="first"),
        KernelLogisticRegression(kernel="laplacian"),
        KernelLogisticRegression(kernel="precomputed"),
        KernelLogisticRegressionCV(Cs=3, cv=3),
        KernelLogisticRegressionCV(Cs=3, cv=3, kernel="precomputed"),
        KernelLogisticRegressionCV(Cs=3, cv=3, temperature=True),
        ImportVectorMachine(),
        ImportVectorMachine(kernel="precomputed"),
        HalfThresholdingKLR(max_iter=500),
        HalfThresholdingKLR(kernel="precomputed", max_iter=500),
    ]


@parametrize_with_checks(_checked_estimators(), expected_failed_checks=_expected_failures)
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
    assert clf.converged_ and clf.kkt_violation_ <= clf.certificate_.tol == 1e-7
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


@pytest.mark.parametrize(
    "params,X_transform,y_transform,error,match",
    [
        (dict(C=0.0), None, None, ValueError, "'C' parameter"),
        (dict(C=-1.0), None, None, ValueError, "'C' parameter"),
        (dict(wss="best"), None, None, ValueError, "'wss' parameter"),
        (dict(lam=-0.1), None, None, ValueError, "'lam' parameter"),
        (dict(lam="C/9"), None, None, ValueError, "'lam' parameter"),
        (dict(bound_eps=0.6), None, None, ValueError, "bound_eps=0.6"),
        (
            dict(bound_eps=0.6, bound_eps_mode="absolute"),
            None,
            None,
            ValueError,
            "bound_eps=0.6 with bound_eps_mode='absolute'",
        ),
        (dict(bound_eps_mode="percent"), None, None, ValueError, "'bound_eps_mode' parameter"),
        (
            dict(C=1e-4, lam=1e-5, bound_eps=1e-5, bound_eps_mode="absolute"),
            None,
            lambda y: np.where(np.arange(len(y)) < 5, -1.0, 1.0),
            ValueError,
            "infeasible",
        ),
        (dict(), lambda X: np.where(X > 2, np.nan, X), None, ValueError, "NaN"),
        (dict(), lambda X: np.where(X > 2, np.inf, X), None, ValueError, "infinity"),
        (dict(), None, lambda y: np.ones_like(y), ValueError, "at least 2 classes"),
        (dict(kernel="precomputed"), lambda X: -rbf_kernel(X), None, ValueError, "not positive semidefinite"),
        (dict(kernel="precomputed"), lambda X: X, None, ValueError, "square"),
    ],
)
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
    # and alpha restarted cold: the same fit, bit for bit
    np.testing.assert_array_equal(kept.dual_coef_, cold.dual_coef_)
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
    np.testing.assert_array_equal(
        model.decision_function(X), KernelLogisticRegression(C=1.0, gamma=0.5).fit(X_inplace, y).decision_function(X)
    )


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


def test_warm_started_estimator_steps_as_the_solver_path(gauss):
    X, y, _, _ = gauss
    Cs, lams = [0.3, 3.0, 30.0], [0.0, 0.3, 3.0]
    model = KernelLogisticRegression(gamma=0.5, tol=1e-8, warm_start=True)
    alphas = [model.set_params(C=C, lam=lam).fit(X, y).solver_results_[0].alpha.copy() for C, lam in zip(Cs, lams)]
    path = solve_path(
        Kernel("rbf", gamma=0.5).cache(X), np.where(y == model.classes_[1], 1.0, -1.0), Cs, lams, tol=1e-8
    )
    assert all(np.array_equal(a, r.alpha) for a, r in zip(alphas, path))


def test_every_estimator_has_the_same_fitted_attributes(gauss):
    X, y, _, _ = gauss
    for model in (KernelLogisticRegression(gamma=0.5), ImportVectorMachine(gamma=0.5), HalfThresholdingKLR(gamma=0.5)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X, y)
        assert model.certificate_ is model.solver_results_[0].certificate
        assert model.converged_ == model.certificate_.satisfied and model.n_iter_ == model.solver_results_[0].n_iter
        assert model.n_kernel_evals_ > 0 and model.support_fraction_ == len(model.support_) / len(y)
        assert not any(
            name.endswith("_") and name[:-1] in ("kkt_violation", "relative_decrease", "relative_improvement")
            for name in vars(model)
        )  # views, not attributes set at run time


def test_lambda_zero_is_klr():
    X, y = problem(7)
    sparse = KernelLogisticRegression.from_preset("KLR-2ord", C=5.0, gamma=0.5, tol=1e-9).fit(X, y)
    plain = KernelLogisticRegression(C=5.0, gamma=0.5, tol=1e-9).fit(X, y)
    assert sparse.support_fraction_ == 1.0 and sparse.lam_ == 0.0
    np.testing.assert_allclose(sparse.solver_results_[0].alpha, plain.solver_results_[0].alpha, atol=1e-6)


def test_sparsity_and_prediction_use_only_the_support():
    X, y = problem(8, n=200, imbalance=0.3)
    model = KernelLogisticRegression.from_preset("S-KLR-2ord", C=1e3, gamma=0.5).fit(X, y)
    alpha, lo = model.solver_results_[0].alpha, model.solver_results_[0].info["lo"]
    assert lo == 1e-5 and model.lam_ == 100.0                              # the paper's gamma; lam = C/10
    at_bound = alpha <= lo * (1 + 1e-9)
    assert at_bound.any() and not at_bound.all()
    assert set(model.support_) == set(np.flatnonzero(~at_bound))
    assert model.support_fraction_ == pytest.approx(np.mean(~at_bound))
    K = Kernel("rbf", gamma=0.5)(X, model.support_vectors_)
    np.testing.assert_allclose(model.decision_function(X), K @ model.dual_coef_[0] + model.intercept_[0], atol=1e-10)
    p = model.predict_proba(X)[:, 1]
    assert np.array_equal(model.predict(X) == model.classes_[1], p > 0.5)


def test_relative_and_absolute_bounds():
    X, y = problem(9)
    rel = KernelLogisticRegression(C=100.0, lam=10.0, gamma=0.5).fit(X, y)
    ab = KernelLogisticRegression(C=100.0, lam=10.0, gamma=0.5, bound_eps=1e-5, bound_eps_mode="absolute").fit(X, y)
    assert rel.solver_results_[0].info["lo"] == pytest.approx(1e-3) and ab.solver_results_[0].info["lo"] == 1e-5
    # lam = 0: negligible
    assert KernelLogisticRegression(C=4.0, gamma=0.5).fit(X, y).solver_results_[0].info["lo"] < 1e-11


def test_presets():
    assert set(PRESETS) == {"KLR-1ord", "KLR-2ord", "S-KLR-1ord", "S-KLR-2ord"}
    m = KernelLogisticRegression.from_preset("S-KLR-1ord", C=20.0)
    assert (m.wss, m.lam, m.bound_eps, m.bound_eps_mode, m.C) == ("first", "C/10", 1e-5, "absolute", 20.0)
    with pytest.raises(ValueError, match="preset='SKLR'; accepted values"):
        KernelLogisticRegression.from_preset("SKLR")


def test_warm_start_along_a_grid_reaches_the_cold_optimum():
    X, y = problem(11, n=150, imbalance=0.4)
    warm = KernelLogisticRegression(gamma=0.5, warm_start=True, tol=1e-8)
    for C, lam in [(1.0, 0.0), (10.0, 0.0), (10.0, 3.0), (100.0, 3.0), (100.0, 50.0), (1.0, 0.5)]:
        warm.set_params(C=C, lam=lam).fit(X, y)
        cold = KernelLogisticRegression(gamma=0.5, C=C, lam=lam, tol=1e-8).fit(X, y)
        assert warm.converged_ and cold.converged_
        assert abs(warm.objective_ - cold.objective_) <= 1e-8 * abs(cold.objective_)


def test_ivm_imports_a_duplicated_point_once(data):
    X, y, Xt, _ = data
    X_dup, y_dup = np.r_[X[:30], X[:30:3]], np.r_[y[:30], y[:30:3]]
    ivm = ImportVectorMachine(C=3.0, gamma=0.5, tol=0.0).fit(X_dup, y_dup)
    klr = KernelLogisticRegression(C=3.0, gamma=0.5, tol=1e-10).fit(X_dup, y_dup)
    assert ivm.converged_ and ivm.n_import_ == 30 == len(np.unique(ivm.support_vectors_, axis=0))
    np.testing.assert_allclose(ivm.decision_function(Xt), klr.decision_function(Xt), atol=1e-6)


@pytest.mark.parametrize("blas_threads", [1, None])
@pytest.mark.parametrize("C", [0.5, 5.0])
def test_ivm_with_every_point_is_klr(data, C, blas_threads):
    X, y, Xt, _ = data
    # rounding differs with the threads; with an explicit inverse, one thread stopped at 77 points
    with threadpool_limits(blas_threads):
        ivm = ImportVectorMachine(C=C, gamma=0.5, tol=0.0).fit(X, y)
    klr = KernelLogisticRegression(C=C, gamma=0.5, tol=1e-10).fit(X, y)
    # tol = 0: import until no point lowers H or adds to the span (this K has eigenvalues near 1e-10: 97 and 89 points,
    # whatever the BLAS threads)
    assert ivm.converged_ and ivm.n_import_ >= 0.7 * len(y)
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


def test_half_thresholding_klr_descends_and_sparsifies(data):
    X, y, Xt, yt = data
    fracs = []
    for C in (0.05, 20.0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            m = HalfThresholdingKLR(C=C, gamma=0.5, max_iter=2000, step="fixed").fit(X, y)
        path = np.array(m.objective_path_)
        assert np.all(np.diff(path) <= 1e-9 * np.abs(path[1:]))         # the safe step 1/L descends at every iteration
        fracs.append(m.support_fraction_)
    assert fracs[0] < fracs[1]
    with pytest.warns(ConvergenceWarning, match="did not converge in 3 iterations"):
        HalfThresholdingKLR(C=20.0, gamma=0.5, max_iter=3).fit(X, y)


@pytest.mark.parametrize("Model", [ImportVectorMachine, HalfThresholdingKLR])
def test_baselines_bad_input(Model, data):
    X, y, _, _ = data
    with pytest.raises(ValueError, match="'C' parameter"):
        Model(C=0.0).fit(X, y)
    with pytest.raises(ValueError, match="binary classifier"):
        Model().fit(X, np.arange(len(y)) % 3)
    with pytest.raises(ValueError, match="NaN"):
        Model().fit(np.where(X > 0.9, np.nan, X), y)


def test_ivm_candidate_sample_the_size_of_the_data_is_exact_and_seeded_runs_repeat(data):
    X, y, Xt, _ = data
    exact = ImportVectorMachine(C=2.0, gamma=0.5).fit(X, y)
    assert np.array_equal(ImportVectorMachine(C=2.0, gamma=0.5, n_candidates=len(y)).fit(X, y).support_, exact.support_)
    a, b = (ImportVectorMachine(C=2.0, gamma=0.5, n_candidates=10, random_state=3).fit(X, y) for _ in range(2))
    assert np.array_equal(a.support_, b.support_) and a.converged_
    np.testing.assert_array_equal(a.decision_function(Xt), b.decision_function(Xt))


def test_ivm_candidate_sample_with_duplicates_reaches_klr(data):
    X, y, Xt, _ = data
    X_dup, y_dup = np.r_[X[:30], X[:30:3]], np.r_[y[:30], y[:30:3]]
    ivm = ImportVectorMachine(C=3.0, gamma=0.5, tol=0.0, n_candidates=4, random_state=0).fit(X_dup, y_dup)
    klr = KernelLogisticRegression(C=3.0, gamma=0.5, tol=1e-10).fit(X_dup, y_dup)
    assert ivm.converged_ and ivm.n_import_ == 30 == len(np.unique(ivm.support_vectors_, axis=0))
    np.testing.assert_allclose(ivm.decision_function(Xt), klr.decision_function(Xt), atol=1e-6)


@pytest.mark.parametrize("bad", [dict(n_candidates=0), dict(n_candidates=2.5), dict(random_state="seed")])
def test_ivm_rejects_bad_candidate_parameters(data, bad):
    X, y, _, _ = data
    with pytest.raises(ValueError, match=next(iter(bad))):
        ImportVectorMachine(**bad).fit(X, y)


def prox_gradient_norm_from_scratch(X, y, C, model):
    """L ||theta - prox_{1/L}(theta - grad/L)||_inf for the fitted (beta, b), with L and the gradient rebuilt from the
    data."""
    K = Kernel("rbf", gamma=0.5)(X)
    yy = np.where(y == model.classes_[1], 1.0, -1.0)
    beta = np.zeros(len(y)); beta[model.support_] = model.dual_coef_[0]
    b = model.intercept_[0]
    r = -C * yy * expit(-yy * (K @ beta + b))
    L = C / 4 * np.linalg.norm(np.c_[K, np.ones(len(y))], 2) ** 2
    return L * max(np.abs(beta - half_threshold(beta - K @ r / L, 1 / L)).max(), abs(r.sum()) / L)


@pytest.mark.parametrize("C", [0.3, 5.0])
def test_half_thresholding_sparsa_step_goes_lower_and_certifies_it(data, C):
    X, y, _, _ = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fixed = HalfThresholdingKLR(C=C, gamma=0.5, step="fixed", max_iter=3000).fit(X, y)
    bb = HalfThresholdingKLR(C=C, gamma=0.5, tol=1e-10, max_iter=20000).fit(X, y)
    assert bb.converged_ and bb.objective_path_[-1] <= fixed.objective_path_[-1] * (1 + 1e-12)
    for m in (fixed, bb):                                   # the reported certificate is the one rebuilt from the data
        assert np.isclose(m.prox_gradient_norm_, prox_gradient_norm_from_scratch(X, y, C, m), rtol=1e-6, atol=1e-9)
    assert bb.prox_gradient_norm_ < 0.1 * fixed.prox_gradient_norm_


@pytest.mark.parametrize("C", [10.0, 1000.0])
def test_half_thresholding_converged_means_little_left_to_gain(C):
    # The stop rule averages the best objective's decrease over 50 SpaRSA steps: a single step that happens to land near
    # the non-monotone reference no longer ends the run (it did at C = 1000 on wisconsin, at an objective 2.4x too
    # high).
    from sklearn.datasets import load_breast_cancer
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        # A cap well above the ~5 000-6 000 steps the stop rule takes at C = 10 (the count moves with the BLAS build),
        # so the rule, not the cap, ends the run.
        stopped = HalfThresholdingKLR(C=C, gamma=0.5, max_iter=20_000).fit(X, y)
        if C == 1000.0:   # its objective still falls by half between 20 000 and 60 000 steps: no early stop here
            assert not stopped.converged_ and stopped.n_iter_ == stopped.max_iter
            return
        assert stopped.converged_
        longer = HalfThresholdingKLR(C=C, gamma=0.5, tol=0.0, max_iter=3 * stopped.n_iter_).fit(X, y)
    assert longer.objective_path_[-1] >= 0.98 * stopped.objective_path_[-1]


def test_half_thresholding_grid_in_lockstep_equals_fits_one_by_one(data):
    # Problems on a 95 % part and on all points, at three C: each must follow its own fit (the safe step is not
    # chaotic).
    X, y, X_test, _ = data
    part = np.sort(np.random.default_rng(0).permutation(len(y))[:95])
    subsets = [part, np.arange(len(y))] * 3
    models = [
        HalfThresholdingKLR(C=C, gamma=0.5, step="fixed", max_iter=800) for C in (0.3, 3.0, 30.0) for _ in range(2)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert fit_half_thresholding_many(models, X, y, subsets) == models
        alone = [
            HalfThresholdingKLR(C=m.C, gamma=0.5, step="fixed", max_iter=800).fit(X[rows], y[rows])
            for m, rows in zip(models, subsets)
        ]
    assert len({m.n_iter_ for m in models}) > 1                              # some stop early, others run on
    for m, a in zip(models, alone):
        assert m.n_iter_ == a.n_iter_ and m.converged_ == a.converged_ and np.array_equal(m.support_, a.support_)
        assert np.allclose(m.objective_path_, a.objective_path_, rtol=1e-9)
        assert np.allclose(m.decision_function(X_test), a.decision_function(X_test), rtol=1e-7, atol=1e-9)
        assert np.isclose(m.prox_gradient_norm_, a.prox_gradient_norm_, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(
    "models, subsets, message",
    [
        (
            [HalfThresholdingKLR(gamma=0.5), HalfThresholdingKLR(gamma=0.5)],
            [np.arange(10)],
            "one array of row indices per model",
        ),
        ([HalfThresholdingKLR(gamma=0.5)] * 2, None, "each estimator may appear once"),
        ([HalfThresholdingKLR(gamma=0.5)], [np.array([0, 1, 1])], "distinct row indices"),
        ([HalfThresholdingKLR(gamma=0.5)], [np.array([0, 100])], "distinct row indices"),
        ([HalfThresholdingKLR(gamma=0.5), HalfThresholdingKLR(gamma=0.5, step="fixed")], None, "differ only in C"),
        ([HalfThresholdingKLR(gamma=0.5), ImportVectorMachine(gamma=0.5)], None, "differ only in C"),
        ([HalfThresholdingKLR(), HalfThresholdingKLR()], [np.arange(50), np.arange(100)], "gamma as a number"),
        ([HalfThresholdingKLR(gamma=0.5), HalfThresholdingKLR(gamma=0.5)], "one class", "at least 2 classes"),
        ([HalfThresholdingKLR(gamma=0.5), HalfThresholdingKLR(gamma=0.5)], "other classes", "same two classes"),
        ([HalfThresholdingKLR(gamma=0.5, C=-1.0)], None, "C"),
    ],
)
def test_half_thresholding_grid_bad_input(data, models, subsets, message):
    X, y, _, _ = data
    if subsets == "one class": subsets = [np.flatnonzero(y == 1)[:5], np.arange(len(y))]
    # {0, 1} and {1, 2}
    if subsets == "other classes": y = np.r_[y[:50], y[50:] + 1]; subsets = [np.arange(50), np.arange(50, 100)]
    with pytest.raises(ValueError, match=message):
        fit_half_thresholding_many(models, X, y, subsets)


# ---------------------------------------------------------------- no silent parameters

PERFORMANCE_ONLY = {"cache_size", "warm_start"}     # they change what a fit costs, never the model it returns
# bound_eps = 0.05 C binds at the solution here (the smallest alpha / C of the default fit is 0.03)
SWEEP = {
    KernelLogisticRegression: dict(C=3.0, kernel="linear", gamma=0.3, degree=2, coef0=1.0, lam=0.5, wss="first",
                                   tol=1e-3, max_iter=5, bound_eps=0.05, bound_eps_mode="absolute", scheme="keerthi",
                                   start="bound"),
    ImportVectorMachine: dict(C=3.0, kernel="linear", gamma=0.3, degree=2, coef0=1.0, tol=1e-1, max_import=3,
                              n_candidates=5, random_state=1),
    HalfThresholdingKLR: dict(C=3.0, kernel="linear", gamma=0.3, degree=2, coef0=1.0, tol=1e-2, max_iter=5,
                              step="fixed"),
}


@pytest.mark.parametrize("estimator,name", [(e, n) for e, values in SWEEP.items() for n in values])
def test_no_parameter_is_silently_ignored(gauss, estimator, name):
    "Set alone away from its default, every parameter changes the model, or a warning or an error names it."
    X, y, Xt, _ = gauss
    assert set(SWEEP[estimator]) | PERFORMANCE_ONLY >= set(estimator().get_params())     # the sweep covers them all
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = estimator().fit(X, y).decision_function(Xt)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            changed = estimator(**{name: SWEEP[estimator][name]}).fit(X, y).decision_function(Xt)
        except ValueError as error:
            assert name in str(error), error
            return
    named = [w for w in caught if f"{name}=" in str(w.message)]
    assert named or not np.array_equal(changed, default), f"{name} changed nothing and no warning named it"


def test_bound_eps_mode_without_bound_eps_is_refused(gauss):
    X, y, _, _ = gauss
    with pytest.raises(ValueError, match="bound_eps_mode='absolute' needs bound_eps"):
        KernelLogisticRegression(lam=1.0, bound_eps_mode="absolute").fit(X, y)


def test_lam_past_the_bound_warns_that_the_model_is_saturated():
    from klrlab.bounds import SaturationWarning, lambda_upper_bound
    X, y = problem(14, n=80, imbalance=0.3)
    lam = 5 * lambda_upper_bound(X, y, 1.0, Kernel("rbf", gamma=0.5))
    with pytest.warns(SaturationWarning, match=r"lam=.* saturates the model: every alpha of the class labelled -1"):
        model = KernelLogisticRegression(C=1.0, gamma=0.5, lam=lam).fit(X, y)
    assert np.all((model.predict_proba(X)[:, 1] < 1e-6) | (model.predict_proba(X)[:, 1] > 1 - 1e-6))
    with warnings.catch_warnings():
        warnings.simplefilter("error", SaturationWarning)
        KernelLogisticRegression(C=1.0, gamma=0.5, lam=0.1).fit(X, y)            # well inside the range: quiet


@pytest.mark.parametrize("start", ["C", "paper", "bound"])
def test_every_start_reaches_the_optimum_of_a_generic_convex_solver(start):
    "Run to the tolerance, each cold start gives the dual's optimum, checked against SciPy's SLSQP on the same problem."
    from scipy.optimize import minimize
    X, y = problem(21, n=24, imbalance=0.4)
    C, lam, lo = 2.0, 0.3, 1e-5
    model = KernelLogisticRegression(C=C, gamma=0.5, lam=lam, bound_eps=lo, bound_eps_mode="absolute", tol=1e-9,
                                     start=start).fit(X, y)
    ypm = np.where(y == model.classes_[1], 1.0, -1.0)
    Q = np.outer(ypm, ypm) * Kernel("rbf", gamma=0.5)(X)

    def f(a): return 0.5 * a @ Q @ a + np.sum(a * np.log(a) + (C - a) * np.log(C - a)) - lam * a.sum()

    def grad(a): return Q @ a + np.log(a / (C - a)) - lam

    a0 = np.where(ypm > 0, 1 / (ypm > 0).sum(), 1 / (ypm < 0).sum())
    ref = minimize(f, a0, jac=grad, method="SLSQP", bounds=[(lo, C - lo)] * len(y), tol=1e-14,
                   constraints=[dict(type="eq", fun=lambda a: a @ ypm, jac=lambda a: ypm)], options=dict(maxiter=1000))
    assert ref.success and model.converged_
    assert f(model.solver_results_[0].alpha) <= ref.fun + 1e-7
    np.testing.assert_allclose(model.solver_results_[0].alpha, ref.x, atol=2e-3)


def test_a_capped_fit_from_the_bound_keeps_the_untouched_points_out_of_the_support():
    X, y = problem(22, n=200)
    steps = 20
    fits = {s: KernelLogisticRegression(C=100.0, gamma=0.5, lam=10.0, bound_eps=1e-5, bound_eps_mode="absolute",
                                        max_iter=steps, start=s) for s in ("C", "paper", "bound")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ratio = {s: m.fit(X, y).support_fraction_ for s, m in fits.items()}
    minority = min(np.sum(y == c) for c in np.unique(y))
    assert ratio["C"] == ratio["paper"] == 1.0                   # untouched alphas keep a start above gamma
    assert ratio["bound"] <= (2 * steps + (minority if minority < 100 else 0)) / len(y)


# ---------------------------------------------------------------- KernelLogisticRegressionCV

def test_cv_matches_grid_search_over_kernel_logistic_regression(gauss):
    "The oracle: GridSearchCV over KernelLogisticRegression with the same folds, grid and score."
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from klrlab import KernelLogisticRegressionCV
    X, y, Xt, _ = gauss
    folds = StratifiedKFold(4, shuffle=True, random_state=1)
    for scoring in ("neg_log_loss", "accuracy"):
        ours = KernelLogisticRegressionCV(Cs=[0.1, 1.0, 10.0, 100.0], cv=folds, scoring=scoring, gamma=0.5,
                                          tol=1e-9).fit(X, y)
        search = GridSearchCV(KernelLogisticRegression(gamma=0.5, tol=1e-9), {"C": ours.Cs_}, cv=folds,
                              scoring=scoring).fit(X, y)
        np.testing.assert_allclose(ours.cv_results_["mean_score"], search.cv_results_["mean_test_score"], rtol=1e-6)
        mean = ours.cv_results_["mean_score"]
        if scoring == "accuracy": assert (mean == mean.max()).sum() >= 2     # this data ties two C on accuracy:
        assert ours.C_ == search.best_params_["C"] == ours.Cs_[np.flatnonzero(mean == mean.max())[0]]   # smaller wins
        np.testing.assert_allclose(ours.predict_proba(Xt),
                                   KernelLogisticRegression(C=ours.C_, gamma=0.5, tol=1e-9).fit(X, y).predict_proba(Xt),
                                   atol=1e-7)


def test_cv_multiclass_and_row_cache_fallback():
    from sklearn.datasets import load_iris
    from sklearn.model_selection import StratifiedKFold
    from klrlab import KernelLogisticRegressionCV
    X, y = load_iris(return_X_y=True)
    folds = StratifiedKFold(3, shuffle=True, random_state=0)
    whole = KernelLogisticRegressionCV(Cs=3, cv=folds, gamma=0.5, tol=1e-8).fit(X, y)
    rows = KernelLogisticRegressionCV(Cs=3, cv=folds, gamma=0.5, tol=1e-8, cache_size=0.01).fit(X, y)
    np.testing.assert_allclose(whole.scores_, rows.scores_, rtol=1e-7)
    assert whole.scores_.shape == (3, 3) and np.allclose(whole.predict_proba(X).sum(axis=1), 1.0)
    assert whole.C_ in whole.Cs_ and whole.best_score_ == whole.cv_results_["mean_score"].max()


@pytest.mark.parametrize("multiclass", [False, True])
def test_cv_refit_from_the_folds_mean_alpha_is_the_cold_fit(multiclass):
    """The refit starts from each point's alpha averaged over its training folds: the same model as a cold fit at C_
    (to the tolerance), in fewer SMO steps; one start per one-vs-rest problem. A point no fold trained on (splits that
    always hold it out) starts at the box's lower bound and is still fitted."""
    from sklearn.datasets import load_breast_cancer, load_iris
    from sklearn.model_selection import StratifiedKFold
    from sklearn.preprocessing import MinMaxScaler
    from klrlab import KernelLogisticRegressionCV
    X, y = load_iris(return_X_y=True) if multiclass else load_breast_cancer(return_X_y=True)
    X = MinMaxScaler().fit_transform(X)
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    ours = KernelLogisticRegressionCV(Cs=[100.0], cv=folds, gamma=0.5, tol=1e-6).fit(X, y)
    cold = KernelLogisticRegression(C=100.0, gamma=0.5, tol=1e-6).fit(X, y)
    np.testing.assert_allclose(ours.decision_function(X), cold.decision_function(X), atol=1e-4)
    assert np.all(np.atleast_1d(ours.n_iter_) < np.atleast_1d(cold.n_iter_))
    assert ours.certificate_.value <= 1e-6
    index = np.arange(len(y))
    never_trained = [(index[(index != 3) & (index % 2 == k)], index[(index == 3) | (index % 2 != k)]) for k in (0, 1)]
    partial = KernelLogisticRegressionCV(Cs=[100.0], cv=never_trained, gamma=0.5, tol=1e-6).fit(X, y)
    np.testing.assert_allclose(partial.decision_function(X), cold.decision_function(X), atol=1e-4)


@pytest.mark.parametrize("params,message", [(dict(Cs=[1.0, 0.0]), "Cs="), (dict(Cs=[]), "Cs="),
                                            (dict(Cs=0), "'Cs' parameter"), (dict(scoring="roc"), "'scoring'"),
                                            (dict(Cs=True), "'Cs' parameter.*Got True"),
                                            (dict(Cs=[[1.0, 10.0]]), "Cs="), (dict(Cs=[1.0, "a"]), "Cs="),
                                            (dict(Cs={1.0, 2.0}), "Cs=")])
def test_cv_bad_grid_and_scoring_are_named(gauss, params, message):
    from klrlab import KernelLogisticRegressionCV
    X, y, _, _ = gauss
    with pytest.raises(ValueError, match=message):
        KernelLogisticRegressionCV(**params).fit(X, y)


def test_cv_fold_with_one_class_is_refused():
    from sklearn.model_selection import KFold
    from klrlab import KernelLogisticRegressionCV
    X = np.random.default_rng(0).normal(size=(20, 2)); y = np.r_[np.zeros(10), np.ones(10)]
    with pytest.raises(ValueError, match="one class"):
        KernelLogisticRegressionCV(Cs=2, cv=KFold(2)).fit(X, y)


def test_cv_fold_without_a_class_is_refused_by_name():
    from klrlab import KernelLogisticRegressionCV
    X = np.random.default_rng(0).normal(size=(30, 2)); y = np.r_[np.zeros(14), np.ones(14), [2, 2]].astype(int)
    folds = [(np.r_[0:10, 14:24], np.r_[10:14, 24:30]), (np.r_[4:14, 18:30], np.r_[0:4, 14:18])]
    with pytest.raises(ValueError, match=r"cv: fold 0 trains without class\(es\) \[2\]"):
        KernelLogisticRegressionCV(Cs=2, cv=folds).fit(X, y)


def test_multiclass_probabilities_far_from_the_data_do_not_underflow_to_nan():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 5)), rng.integers(0, 3, 60)
    model = KernelLogisticRegression(kernel="linear").fit(X, y)
    W = model.dual_coef_ @ model.support_vectors_
    far = 1000 * np.linalg.lstsq(W, -np.ones(3), rcond=None)[0][None]     # every decision value near -1000
    assert (model.decision_function(far) < -745).all()
    P = model.predict_proba(far)
    np.testing.assert_allclose(P, np.exp(model.predict_log_proba(far)), rtol=1e-12)
    assert np.isclose(P.sum(), 1.0) and model.predict(far)[0] == model.classes_[np.argmax(P)]


def test_float32_precomputed_gram_matrix_is_accepted():
    from sklearn.svm import SVC
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 10)).astype(np.float32); y = rng.integers(0, 2, 50)
    gram = X @ X.T                                                       # rank 10, float32 rounding
    ours = KernelLogisticRegression(kernel="precomputed", tol=1e-8).fit(gram, y)
    exact = KernelLogisticRegression(kernel="precomputed", tol=1e-8).fit(gram.astype(np.float64), y)
    np.testing.assert_allclose(ours.decision_function(gram), exact.decision_function(gram.astype(np.float64)))
    SVC(kernel="precomputed").fit(gram, y)                               # the anchor accepts it too


def test_stalled_and_capped_runs_give_advice_that_fits():
    rng = np.random.default_rng(0); X = rng.normal(size=(40, 2)); y = (X[:, 0] > 0).astype(int)
    with pytest.warns(ConvergenceWarning, match="Raise max_import"):
        ImportVectorMachine(max_import=2).fit(X, y)
    with pytest.warns(ConvergenceWarning) as caught:
        model = HalfThresholdingKLR(max_iter=3).fit(X, y)        # fewer steps than SpaRSA's stop window
    assert np.isfinite(model.certificate_.value) and "inf" not in str(caught[0].message)
    with pytest.warns(ConvergenceWarning, match="below what rounding allows"):
        KernelLogisticRegression(C=1e3, tol=1e-15).fit(X, y)


def test_overflowing_variance_and_an_infeasible_bound_are_explained():
    rng = np.random.default_rng(0); X = rng.normal(size=(40, 2)); y = (X[:, 0] > 0).astype(int)
    with pytest.raises(ValueError, match="X.var\\(\\) overflows"):
        with np.errstate(over="ignore"):
            KernelLogisticRegression().fit(X * 1e200, y)
    with pytest.raises(ValueError, match="bound_eps"):
        KernelLogisticRegression(C=1000, bound_eps=0.3).fit(X, np.r_[np.ones(10), np.zeros(30)].astype(int))


def test_cv_takes_groups_for_a_group_splitter():
    from sklearn.model_selection import GroupKFold
    from klrlab import KernelLogisticRegressionCV
    rng = np.random.default_rng(3)
    X = rng.normal(size=(90, 2)); y = (X[:, 0] + 0.5 * rng.normal(size=90) > 0).astype(int)
    groups = np.repeat(np.arange(9), 10)
    ours = KernelLogisticRegressionCV(Cs=[0.1, 10.0], cv=GroupKFold(3), gamma=0.5, tol=1e-8).fit(X, y, groups=groups)
    for fold, (train, test) in enumerate(GroupKFold(3).split(X, y, groups)):
        for c, C in enumerate([0.1, 10.0]):
            model = KernelLogisticRegression(C=C, gamma=0.5, tol=1e-8).fit(X[train], y[train])
            log_p = model.predict_log_proba(X[test])[np.arange(len(test)), y[test]]
            assert abs(ours.scores_[fold, c] - log_p.mean()) < 1e-6
    with pytest.raises(ValueError, match="groups"):
        KernelLogisticRegressionCV(Cs=[1.0], cv=GroupKFold(3)).fit(X, y)


def test_an_offset_does_not_change_the_rbf_model():
    # the Gaussian kernel sees only differences: features offset by 1e7 must give the same fit
    rng = np.random.default_rng(11)
    X = rng.normal(size=(80, 2))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=80) > 0, 1, -1)
    near = KernelLogisticRegression(C=10.0, gamma=0.5).fit(X, y)
    far = KernelLogisticRegression(C=10.0, gamma=0.5).fit(X + 1e7, y)
    np.testing.assert_allclose(far.decision_function(X[:20] + 1e7), near.decision_function(X[:20]), atol=1e-6)


@pytest.mark.parametrize("make", [lambda: KernelLogisticRegression(kernel="precomputed"),
                                  lambda: FrankWolfeSVC(kernel="precomputed", random_state=0)])
def test_a_precomputed_kernel_is_checked_once_per_fit(monkeypatch, make):
    # the eigenvalue check is O(n^3): the cache and the one-vs-one blocks rely on the estimator's own check
    import klrlab.base as base_module
    import klrlab.kernels as kernels_module
    calls, original = [], kernels_module.check_precomputed_kernel
    def counting(K, *args, **kwargs):
        calls.append(np.shape(K))
        return original(K, *args, **kwargs)
    monkeypatch.setattr(base_module, "check_precomputed_kernel", counting)
    monkeypatch.setattr(kernels_module, "check_precomputed_kernel", counting)
    X = np.random.default_rng(5).normal(size=(45, 3))
    y = np.repeat([0, 1, 2], 15)
    make().fit(rbf_kernel(X, gamma=0.5), y)
    assert calls == [(45, 45)]


@pytest.mark.parametrize("name", ["HalfThresholdingKLR", "ImportVectorMachine"])
def test_a_kernel_matrix_whose_products_overflow_is_refused_by_name(name):
    import klrlab
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = (X[:, 0] > 0).astype(int)
    # features: refused from their norms before the matrix is formed
    with pytest.raises(ValueError, match="linear kernel's values .* overflow float64; scale the features"):
        getattr(klrlab, name)(kernel="linear").fit(X * 1e77, y)
    # a precomputed matrix: refused from its values
    with pytest.raises(ValueError, match="kernel values up to .* overflow float64: scale the features"):
        getattr(klrlab, name)(kernel="precomputed").fit((X @ X.T + 40 * np.eye(40)) * 1e154, y)
    getattr(klrlab, name)(kernel="linear").fit(X * 1e30, y)        # large, but its products stay finite


def test_plain_klr_keeps_every_point_so_a_huge_C_keeps_its_certified_decision():
    # at C = 1e13 Keerthi's "negligible" lower bound mu C is 2.2 per point: leaving the points at it out of the model
    # (the sparse model's rule) gave training accuracy 0.615 against 1.0 for the certified solution
    from sklearn.datasets import make_classification
    X, y = make_classification(n_samples=400, n_features=4, n_informative=3, n_redundant=0,
                               n_clusters_per_class=1, random_state=1)
    for C in (1.0, 1e13):
        model = KernelLogisticRegression(C=C).fit(X, y)
        alpha = model.solver_results_[0].alpha
        assert model.support_fraction_ == 1.0
        K = Kernel("rbf", gamma=model._kernel.gamma)(X, X)
        full = K @ (alpha * np.where(y == model.classes_[1], 1.0, -1.0)) + model.solver_results_[0].bias
        np.testing.assert_allclose(model.decision_function(X), full, rtol=1e-9, atol=1e-9 * np.abs(full).max())
    assert np.sum(np.isclose(alpha, model.solver_results_[0].info["lo"])) > 10     # many points at the bound at 1e13
    assert model.score(X, y) > 0.95
    # a bound the user sets is Consolo et al.'s gamma, below which a point counts as zero, also at lam = 0
    bounded = KernelLogisticRegression(C=1e3, bound_eps=1e-3).fit(X, y)
    at_bound = bounded.solver_results_[0].alpha <= bounded.solver_results_[0].info["lo"] * (1 + 1e-9)
    assert at_bound.any() and np.array_equal(bounded.support_, np.flatnonzero(~at_bound))


@pytest.mark.parametrize("estimator, attributes", [
    (ImportVectorMachine(), ["n_import_", "relative_improvement_", "objective_path_"]),
    (HalfThresholdingKLR(), ["relative_decrease_", "prox_gradient_norm_", "objective_path_"]),
])
def test_result_properties_before_fit_raise_not_fitted(estimator, attributes):
    from sklearn.exceptions import NotFittedError
    for name in attributes:
        with pytest.raises(NotFittedError):
            getattr(estimator, name)


def test_cross_validated_klr_checks_and_warns_once_per_fit():
    from klrlab import KernelLogisticRegressionCV
    X, y = make_twonorm(60, n_features=3, seed=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        KernelLogisticRegressionCV(Cs=2, cv=3, degree=5).fit(X, y)
    unused = [w for w in caught if "has no effect" in str(w.message)]
    assert len(unused) == 1 and "degree=5" in str(unused[0].message)


@pytest.mark.parametrize("Estimator", [ImportVectorMachine, HalfThresholdingKLR])
def test_primal_expansion_estimators_take_the_polynomial_kernels_degree_and_coef0(Estimator):
    from sklearn.metrics.pairwise import polynomial_kernel
    X, y = make_twonorm(60, n_features=3, seed=5)
    model = Estimator(kernel="poly", degree=2, coef0=1.0, gamma=0.5).fit(X, y)
    K = polynomial_kernel(X, degree=2, coef0=1.0, gamma=0.5)
    on_matrix = Estimator(kernel="precomputed").fit(K, y)
    np.testing.assert_allclose(model.decision_function(X), on_matrix.decision_function(K), rtol=1e-9, atol=1e-9)
    assert model.set_params(degree=3).get_params()["degree"] == 3


@pytest.mark.parametrize("Estimator", [ImportVectorMachine, HalfThresholdingKLR])
def test_a_C_whose_curvature_overflows_is_refused_by_name(Estimator):
    X, y = make_twonorm(40, n_features=3, seed=6)
    with pytest.raises(ValueError, match=r"C=1e\+308 is too large"):
        Estimator(C=1e308).fit(X, y)
    with pytest.raises(ValueError, match=r"C=1e\+308 is too large"):
        fit_half_thresholding_many([HalfThresholdingKLR(C=1.0), HalfThresholdingKLR(C=1e308)], X, y)


def test_half_thresholding_warns_when_it_keeps_no_point():
    X, y = make_twonorm(60, n_features=3, seed=7)
    with pytest.warns(ConstantModelWarning, match="kept no point at C=1e-06"):
        model = HalfThresholdingKLR(C=1e-6).fit(X, y)
    assert not len(model.support_) and len(np.unique(model.predict(X))) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert len(HalfThresholdingKLR(C=10.0).fit(X, y).support_)


def test_one_vs_rest_reports_its_worst_problem_s_certificate():
    from sklearn.datasets import load_iris
    X, y = load_iris(return_X_y=True)
    clf = KernelLogisticRegression(C=10.0, gamma=0.5).fit(X, y)
    values = [r.certificate.value for r in clf.solver_results_]
    assert len(values) == 3 and len(set(values)) == 3 and clf.certificate_.value == max(values)


def test_running_out_of_steps_on_unscaled_features_advises_scaling():
    # found by a stress audit: 'increase max_iter' barely helps when C times the kernel's scale is huge
    from sklearn.datasets import make_classification
    X, y = make_classification(100, 4, random_state=0)
    with pytest.warns(ConvergenceWarning, match="kernel's largest diagonal value is .*scale the features"):
        KernelLogisticRegression(kernel="linear", max_iter=2000).fit(1e6 * X, y)
    with pytest.warns(ConvergenceWarning, match="Increase max_iter, or loosen tol") as caught:
        KernelLogisticRegression(gamma=0.5, max_iter=5).fit(X, y)
    assert not any("scale the features" in str(w.message) for w in caught)


def test_cv_splits_that_cannot_be_scored_are_refused_by_name(gauss):
    from klrlab import KernelLogisticRegressionCV
    X, y, _, _ = gauss
    idx = np.arange(len(y))
    for cv, message in [([], "no \\(train, test\\) split"), ([(idx, idx[:0])], "fold 0 has no held-out points"),
                        ([(idx[:40], idx[40:]), (idx[:0], idx)], "fold 1 has no training points"),
                        ([(idx[:40], np.array([0.5]))], "integer indices"),
                        ([(idx[:40] > 0, idx[40:])], "mask has shape")]:
        with pytest.raises(ValueError, match=message):
            KernelLogisticRegressionCV(Cs=2, cv=cv, gamma=0.5).fit(X, y)


def test_cv_takes_boolean_masks_and_bootstrap_splits(gauss):
    # masks mark the same points as index arrays; a split that repeats indices (a bootstrap) is scored as given, on
    # the kernel matrix as on row caches
    from klrlab import KernelLogisticRegressionCV
    X, y, _, _ = gauss
    n, rng = len(y), np.random.default_rng(0)
    halves = [(np.arange(n) < n // 2, np.arange(n) >= n // 2), (np.arange(n) >= n // 2, np.arange(n) < n // 2)]
    as_indices = [(np.flatnonzero(a), np.flatnonzero(b)) for a, b in halves]
    masked = KernelLogisticRegressionCV(Cs=[0.1, 10.0], cv=halves, gamma=0.5, tol=1e-8).fit(X, y)
    indexed = KernelLogisticRegressionCV(Cs=[0.1, 10.0], cv=as_indices, gamma=0.5, tol=1e-8).fit(X, y)
    assert np.array_equal(masked.scores_, indexed.scores_)
    boot = [(rng.integers(0, n, n), rng.integers(0, n, n // 3)) for _ in range(2)]
    whole = KernelLogisticRegressionCV(Cs=[0.1, 10.0], cv=boot, gamma=0.5, tol=1e-8).fit(X, y)
    rows = KernelLogisticRegressionCV(Cs=[0.1, 10.0], cv=boot, gamma=0.5, tol=1e-8, cache_size=0.001).fit(X, y)
    assert np.allclose(whole.scores_, rows.scores_, rtol=1e-7)
    model = KernelLogisticRegression(C=10.0, gamma=0.5, tol=1e-8).fit(X[boot[0][0]], y[boot[0][0]])
    held_out = np.mean(np.log(model.predict_proba(X[boot[0][1]])[np.arange(n // 3),
                                                                  np.searchsorted(model.classes_, y[boot[0][1]])]))
    assert np.isclose(whole.scores_[0, 1], held_out, rtol=1e-6)


def test_cv_bad_grid_leaves_a_fitted_model_as_it_was(gauss):
    from klrlab import KernelLogisticRegressionCV
    X, y, _, _ = gauss
    model = KernelLogisticRegressionCV(Cs=2, cv=3, gamma=0.5).fit(X, y)
    before = model.predict_proba(X)
    three = np.where(np.arange(len(y)) % 3 == 0, 2, y)
    with pytest.raises(ValueError, match="Cs="):
        model.set_params(Cs=[]).fit(X, three)
    assert list(model.classes_) == sorted(set(y)) and np.array_equal(model.predict_proba(X), before)


def test_cv_fold_warnings_say_why_a_solve_stopped():
    from klrlab import KernelLogisticRegressionCV
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 2)); y = np.where(X[:, 0] + 0.5 * rng.normal(size=60) > 0, 1, 0)
    with pytest.warns(ConvergenceWarning) as caught:
        KernelLogisticRegressionCV(Cs=[1e3], cv=2, tol=1e-14, gamma=1.0).fit(X, y)
    folds = [str(w.message) for w in caught if "fold" in str(w.message)]
    assert folds and not any("max_iter" in m for m in folds)           # they stopped long before max_iter
    assert all("did not converge in" in m and "KKT violation" in m for m in folds)


def test_cv_accuracy_follows_predict_where_probabilities_tie_in_float64():
    "sigmoid(51.9) and sigmoid(56.0) both round to 1: the probabilities tie, the decision values do not."
    from klrlab.klr import _held_out_score, logistic_probabilities
    classes = np.array([0, 1, 2])
    decisions = np.array([[-88.9, 51.9, 56.0]])
    assert logistic_probabilities(decisions)[0, 1] == logistic_probabilities(decisions)[0, 2]
    assert _held_out_score("accuracy", np.array([2]), decisions, classes) == 1.0
    assert _held_out_score("accuracy", np.array([1]), np.array([[0.3], [-0.2]])[:1], np.array([0, 1])) == 1.0


def test_cv_temperature_is_the_held_out_fit_at_the_chosen_C(gauss):
    """temperature=True: T is TemperatureScaled's on the same folds at the chosen C, the probabilities sigmoid(f / T),
    predict unchanged; off (the default), T = 1 and the probabilities are sigmoid(f)."""
    from sklearn.model_selection import StratifiedKFold
    from klrlab import KernelLogisticRegressionCV, TemperatureScaled
    from klrlab.klr import logistic_probabilities
    X, y, Xt, _ = gauss
    folds = StratifiedKFold(4, shuffle=True, random_state=2)
    plain = KernelLogisticRegressionCV(Cs=[0.1, 1.0, 10.0], cv=folds, gamma=0.5, tol=1e-9).fit(X, y)
    assert plain.temperature_ == 1.0 and np.all(plain.cv_results_["temperature"] == 1.0)
    np.testing.assert_array_equal(plain.predict_proba(Xt), logistic_probabilities(plain.decision_function(Xt)))
    tempered = KernelLogisticRegressionCV(Cs=[0.1, 1.0, 10.0], cv=folds, gamma=0.5, tol=1e-9,
                                          temperature=True).fit(X, y)
    wrapped = TemperatureScaled(KernelLogisticRegression(C=tempered.C_, gamma=0.5, tol=1e-9), cv=folds).fit(X, y)
    assert tempered.temperature_ != 1.0
    np.testing.assert_allclose(tempered.temperature_, wrapped.temperature_, rtol=1e-6)
    np.testing.assert_allclose(tempered.predict_proba(Xt), wrapped.predict_proba(Xt), atol=1e-7)
    assert np.array_equal(tempered.predict(Xt), wrapped.predict(Xt))
    scores = tempered.cv_results_["mean_score"]
    assert tempered.C_ == tempered.Cs_[np.argmax(scores)] and tempered.best_score_ == scores.max()


def test_cv_temperature_refuses_more_classes_and_leaves_the_model_as_it_was(gauss):
    from klrlab import KernelLogisticRegressionCV
    X, y, _, _ = gauss
    model = KernelLogisticRegressionCV(Cs=2, cv=3, gamma=0.5, temperature=True).fit(X, y)
    before = model.predict_proba(X)
    three = np.where(np.arange(len(y)) % 3 == 0, 2, y)
    with pytest.raises(ValueError, match="Only binary .* temperature=True .* two classes.*; y has 3 classes"):
        model.fit(X, three)
    assert np.array_equal(model.predict_proba(X), before)
    with pytest.raises(ValueError, match="'temperature' parameter"):
        KernelLogisticRegressionCV(temperature="yes").fit(X, y)


def test_cv_temperature_warns_once_for_the_chosen_C_on_separated_values():
    "Held-out values that separate the classes at every C: one warning (the chosen C's), naming the estimator."
    from klrlab import KernelLogisticRegressionCV
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(-3, 0.3, size=(20, 2)), rng.normal(3, 0.3, size=(20, 2))]; y = np.r_[np.zeros(20), np.ones(20)]
    with pytest.warns(UserWarning) as caught:
        model = KernelLogisticRegressionCV(Cs=[1.0, 10.0, 100.0], cv=4, gamma=0.5, temperature=True).fit(X, y)
    messages = [str(w.message) for w in caught if "separate the classes" in str(w.message)]
    assert len(messages) == 1 and messages[0].startswith("KernelLogisticRegressionCV:")
    assert np.isfinite(model.temperature_) and model.temperature_ > 0
    separated = next(w for w in caught if "separate the classes" in str(w.message))
    assert separated.filename == __file__                          # it points at the caller's fit
    # raised as an error, the warning comes once the model is whole: the new labels' model, not half of each
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="separate the classes"):
            model.fit(X, y + 5)
    assert list(model.classes_) == [5.0, 6.0] and set(model.predict(X)) == {5.0, 6.0}
