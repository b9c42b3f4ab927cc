"""FrankWolfeSVC: the scikit-learn contract, the QP oracle through the estimator, multi-class, bad input."""
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

from klrlab import FrankWolfeSVC
from klrlab.datasets import make_twonorm
from klrlab.kernels import Kernel
from klrlab.dual import meb_matrix
from klrlab.reference import l2svm_dual_qp
from klrlab.solvers.frank_wolfe import solve_frank_wolfe


@parametrize_with_checks([FrankWolfeSVC(), FrankWolfeSVC(algorithm="pairwise", kernel="linear"),
                          FrankWolfeSVC(algorithm="cvm", sample_size=10, n_trials=3)])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("kernel", ["rbf", "poly", "precomputed"])
def test_decision_values_match_the_qp_oracle(kernel):
    X, y = make_twonorm(90, n_features=4, seed=8)
    Xt, _ = make_twonorm(50, n_features=4, seed=9)
    k = Kernel("poly", gamma=0.2, degree=2, coef0=1.0) if kernel == "poly" else Kernel("rbf", gamma=0.2)
    qp = l2svm_dual_qp(k(X), y, 3.0)
    h_qp = k(Xt, X) @ (qp["alpha"] * y) + qp["bias"]
    params = dict(C=3.0, eps=1e-9, random_state=0)
    if kernel == "precomputed":
        model = FrankWolfeSVC(kernel="precomputed", **params).fit(k(X), y)
        h = model.decision_function(k(Xt, X))
    else:
        poly = dict(degree=2, coef0=1.0) if kernel == "poly" else {}
        model = FrankWolfeSVC(kernel=kernel, gamma=0.2, **poly, **params).fit(X, y)
        h = model.decision_function(Xt)
    assert model.converged_ and model.dual_gap_ <= model.certificate_.tol
    np.testing.assert_allclose(h, h_qp, atol=1e-4 * np.abs(h_qp).max())
    assert np.isclose(model.dual_coef_.sum(), model.intercept_[0])          # b = sum alpha_i y_i


def test_support_vectors_are_the_points_with_weight():
    X, y = make_twonorm(200, seed=3)
    model = FrankWolfeSVC(C=1.0, gamma=0.05, random_state=0).fit(X, y)
    alpha = model.solver_results_[0].alpha
    assert list(model.support_) == list(np.flatnonzero(alpha > 0))
    assert model.n_support_.sum() == len(model.support_) and 0 < model.support_fraction_ <= 1


def test_multiclass_one_vs_one_is_max_wins_over_pairwise_models():
    X, y = load_iris(return_X_y=True)
    y = np.array(["setosa", "versicolor", "virginica"])[y]
    model = FrankWolfeSVC(C=10.0, random_state=0).fit(X, y)
    assert model.score(X, y) > 0.9 and model.decision_function(X).shape == (150, 3)
    assert len(model.solver_results_) == 3 and model.dual_gap_.shape == (3,)
    votes = np.zeros((150, 3))
    for (a, b) in [(0, 1), (0, 2), (1, 2)]:        # each pair refitted alone: the same problem, so the same sign
        rows = np.isin(y, model.classes_[[a, b]])
        pair = FrankWolfeSVC(C=10.0, random_state=0).fit(X[rows], np.where(y[rows] == model.classes_[a], 1, 0))
        wins_a = pair.decision_function(X) > 0
        votes[:, a] += wins_a; votes[:, b] += ~wins_a
    clear = np.sort(votes, 1)[:, -1] > np.sort(votes, 1)[:, -2]      # no tie in the votes
    assert clear.sum() > 140
    np.testing.assert_array_equal(model.predict(X)[clear], model.classes_[np.argmax(votes[clear], 1)])


def test_max_iter_warns_with_the_gap_reached():
    X, y = make_twonorm(200, seed=3)
    with pytest.warns(ConvergenceWarning, match="relative_dual_gap"):
        FrankWolfeSVC(algorithm="fw", eps=1e-9, max_iter=50, random_state=0).fit(X, y)


def test_a_multiclass_warning_names_the_pair():
    X, y = load_iris(return_X_y=True)
    with pytest.warns(ConvergenceWarning) as caught:
        FrankWolfeSVC(algorithm="fw", eps=1e-9, max_iter=3, random_state=0).fit(X, y)
    names = sorted(str(w.message).split(" did not converge ")[1].split(" in ")[0] for w in caught)
    assert names == ["(class 0 vs 1)", "(class 0 vs 2)", "(class 1 vs 2)"]


def test_n_trials_without_sampling_is_named():
    X, y = make_twonorm(60, seed=3)
    with pytest.warns(UserWarning, match="n_trials=3 has no effect"):
        FrankWolfeSVC(n_trials=3, random_state=0).fit(X, y)


@pytest.mark.parametrize("bad,name", [(dict(C=0.0), "C"), (dict(eps=1.0), "eps"), (dict(eps=0.0), "eps"),
                                      (dict(algorithm="smo"), "algorithm"), (dict(init="zeros"), "init"),
                                      (dict(sample_size=0), "sample_size"), (dict(kernel="sigmoid"), "kernel")])
def test_bad_parameters_are_named(bad, name):
    X, y = make_twonorm(40, seed=1)
    with pytest.raises(ValueError, match=f"'{name}' parameter"):
        FrankWolfeSVC(**bad).fit(X, y)


def test_a_precomputed_kernel_that_is_not_psd_is_refused():
    X, y = make_twonorm(30, seed=1)
    with pytest.raises(ValueError, match="not positive semidefinite"):
        FrankWolfeSVC(kernel="precomputed").fit(-Kernel("rbf", gamma=0.5)(X), y)


SWEEP = dict(C=3.0, kernel="linear", gamma=0.3, degree=2, coef0=1.0, algorithm="fw", eps=1e-2, max_iter=5,
             init="two-point", sample_size=7, n_trials=3, refine=False, objective_tol=1e-8, random_state=1,
             break_ties=True)


# refine acts only when a run ends above a tolerance: here the objective's, set tight
SWEEP_BASE = dict(refine=dict(objective_tol=1e-8))


@pytest.mark.parametrize("name", list(SWEEP))
def test_no_parameter_is_silently_ignored(name):
    "Set alone away from its default, every parameter changes the model, or a warning or an error names it."
    X, y = make_twonorm(120, seed=6)
    assert set(SWEEP) | {"cache_size"} >= set(FrankWolfeSVC().get_params())    # cache_size only changes the cost
    base = {"random_state": 0} | SWEEP_BASE.get(name, {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = FrankWolfeSVC(**base).fit(X, y).decision_function(X)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        changed = FrankWolfeSVC(**(base | {name: SWEEP[name]})).fit(X, y).decision_function(X)
    named = [w for w in caught if f"{name}=" in str(w.message)]
    assert named or not np.array_equal(changed, default), f"{name} changed nothing and no warning named it"


def test_a_sampled_stop_above_tolerance_warns_with_the_remedy():
    X, y = make_twonorm(1500, seed=4)
    with pytest.warns(ConvergenceWarning, match="sampled stopping test passed .* set refine=True"):
        model = FrankWolfeSVC(gamma=0.05, eps=1e-4, sample_size=5, refine=False, random_state=3).fit(X, y)
    assert not model.converged_ and model.dual_gap_ > model.certificate_.tol
    refined = FrankWolfeSVC(gamma=0.05, eps=1e-4, sample_size=5, refine=True, random_state=3).fit(X, y)
    assert refined.converged_ and refined.dual_gap_ <= refined.certificate_.tol

def shifted_blobs(n=80, seed=3):
    "Two overlapping Gaussian classes in 3-D (the stress audit's case)."
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, 1, -1); y[:2] = 1, -1
    return rng.normal(size=(n, 3)) + 0.5 * y[:, None], y


def test_a_large_kernel_diagonal_no_longer_passes_for_converged_early():
    # Delta^2 = max k_ii + 1 + 1/C dwarfs alpha'Q alpha under a degree-12 polynomial: the ball's test (the paper's)
    # passes long before the L2-SVM is solved. The objective's test carries the run to the QP oracle's optimum.
    X, y = shifted_blobs()
    X, kernel = X / 2, Kernel("poly", gamma=1 / 3, degree=12, coef0=1.0)
    Q = meb_matrix(kernel(X), y, 1.0)
    oracle = l2svm_dual_qp(kernel(X), y.astype(float), 1.0)["alpha"]
    R_opt = oracle @ Q @ oracle
    poly = dict(kernel="poly", degree=12, coef0=1.0, gamma=1 / 3, random_state=0)
    papers = FrankWolfeSVC(objective_tol=None, **poly).fit(X, y)
    ours = FrankWolfeSVC(**poly).fit(X, y)
    R = lambda m: m.solver_results_[0].info["margin"]
    assert papers.converged_ and papers.objective_gap_ > 1 and R(papers) > 1.2 * R_opt     # the paper's stop: early
    assert ours.converged_ and ours.objective_gap_ <= 1e-3 and ours.n_iter_ > papers.n_iter_
    assert R_opt * (1 - 1e-9) <= R(ours) <= R_opt / (1 - ours.objective_gap_)          # what the gap certifies


def test_the_objective_gap_is_recomputed_from_scratch():
    X, y = shifted_blobs(seed=5)
    model = FrankWolfeSVC(C=10.0, gamma=0.5, random_state=0).fit(X, y)
    Q = meb_matrix(Kernel("rbf", gamma=0.5)(X), y, 10.0)
    alpha = model.solver_results_[0].alpha
    s, R = Q @ alpha, alpha @ Q @ alpha
    assert model.objective_gap_ == pytest.approx(2 * (R - s.min()) / R, rel=1e-9)


def test_an_objective_gap_left_open_warns_with_the_remedy():
    X, y = shifted_blobs()
    with pytest.warns(ConvergenceWarning, match="gap relative to alpha'Q alpha is .* > objective_tol = 0.001.*scale"):
        model = FrankWolfeSVC(kernel="linear", max_iter=20_000, random_state=0).fit(1e3 * X, y)
    assert not model.converged_ and model.certificate_.satisfied and model.objective_gap_ > 1e-3


@pytest.mark.parametrize("bad", [0.0, 1.0, -1e-3])
def test_objective_tol_is_checked(bad):
    X, y = shifted_blobs()
    with pytest.raises(ValueError, match="objective_tol"):
        FrankWolfeSVC(objective_tol=bad).fit(X, y)
    with pytest.raises(ValueError, match="objective_tol=.*None"):
        solve_frank_wolfe(Kernel("rbf", gamma=0.5).cache(X), y.astype(float), 1.0, objective_tol=bad)


# ---- SparseSVC (Zhou's NSSVM) ----------------------------------------------------------------------------------------
import pickle  # noqa: E402

import scipy.sparse as sp  # noqa: E402

from klrlab import SparseSVC  # noqa: E402
from klrlab.reference import nssvm_dual_scipy, nssvm_primal_scipy  # noqa: E402
from klrlab.solvers.nssvm import solve_nssvm, sparsity_level  # noqa: E402


@parametrize_with_checks([SparseSVC(), SparseSVC(kernel="rbf", tune_s=False),
                          SparseSVC(jacobian="exact", tune_s=False, beta=0.2)])
def test_sparse_svc_sklearn_estimator_checks(estimator, check):
    check(estimator)


def linear_data(m, n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, n))
    return X, np.where(X @ rng.normal(size=n) + rng.normal(size=m) > 0, "yes", "no")


def test_sparse_svc_with_s_equal_m_is_the_primal_minimiser_of_scipy():
    X, labels = linear_data(80, 4, seed=1)
    model = SparseSVC(C=0.5, c=0.05, s=80, tune_s=False, tol=1e-10).fit(X, labels)
    y = np.where(labels == model.classes_[1], 1.0, -1.0)
    primal = nssvm_primal_scipy(X, y, 0.5, 0.05)
    assert model.converged_ and model.certificate_.measure == "stationarity_residual"
    assert np.linalg.norm(model.coef_[0] - primal["w"]) < 1e-6 and abs(model.intercept_[0] - primal["b"]) < 1e-6
    np.testing.assert_allclose(model.decision_function(X), X @ primal["w"] + primal["b"], atol=1e-6)
    dual = nssvm_dual_scipy(X @ X.T, y, 0.5, 0.05)
    assert model.objective_ == pytest.approx(dual["objective"], abs=1e-9)


def test_sparse_svc_keeps_at_most_s_support_vectors_and_its_model_is_its_dual_coefficients():
    X, labels = linear_data(3000, 6, seed=2)
    model = SparseSVC(s=60, tune_s=False).fit(X, labels)
    r = model.solver_results_[0]
    assert len(model.support_) == model.n_support_vectors_ == np.count_nonzero(r.alpha) <= 60 == model.sparsity_level_
    assert model.n_support_.sum() == len(model.support_)
    np.testing.assert_allclose(model.coef_[0], model.dual_coef_[0] @ model.support_vectors_, atol=1e-10)
    direct = solve_nssvm(X, np.where(labels == "yes", 1.0, -1.0), s=60, trace=False)
    np.testing.assert_allclose(r.alpha, direct.alpha, atol=1e-12)
    assert model.n_iter_ == direct.n_iter and model.converged_


def test_sparse_svc_tunes_s_from_s_beta_by_default():
    X, labels = linear_data(5000, 5, seed=3)
    model = SparseSVC().fit(X, labels)
    s0 = sparsity_level(5000, 5, 0.5)
    assert model.converged_ and model.sparsity_level_ >= s0 and model.n_support_vectors_ <= model.sparsity_level_
    assert SparseSVC(tune_s=False).fit(X, labels).sparsity_level_ == s0


def test_sparse_svc_reads_sparse_X_without_densifying_and_agrees_with_dense():
    rng = np.random.default_rng(4)
    X = sp.random(2000, 150, density=0.03, format="csr", random_state=4, data_rvs=lambda k: rng.uniform(0, 1, k))
    y = np.where(X @ rng.normal(size=150) > 0, 1, 0)
    sparse_model, dense_model = SparseSVC(s=200).fit(X, y), SparseSVC(s=200).fit(X.toarray(), y)
    assert sp.issparse(sparse_model.support_vectors_)
    np.testing.assert_allclose(sparse_model.coef_, dense_model.coef_, atol=1e-9)
    np.testing.assert_allclose(sparse_model.decision_function(X), dense_model.decision_function(X.toarray()),
                               atol=1e-9)
    assert (sparse_model.predict(X) == dense_model.predict(X.toarray())).all()
    with pytest.raises(TypeError, match="[Ss]parse"):
        SparseSVC(kernel="rbf").fit(X, y)                  # the kernel variant needs dense X


def test_sparse_svc_rbf_is_the_kernel_dual_of_scipy_with_s_equal_m():
    X, _ = linear_data(90, 2, seed=5)
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] > 0, 1, -1)
    model = SparseSVC(kernel="rbf", gamma=0.5, C=1.0, c=0.1, s=90, tune_s=False, tol=1e-10).fit(X, y)
    K = Kernel("rbf", gamma=0.5)(X)
    dual = nssvm_dual_scipy(K, y.astype(float), 1.0, 0.1)
    np.testing.assert_allclose(model.decision_function(X), K @ (dual["alpha"] * y) + model.intercept_[0], atol=1e-4)
    assert model.objective_ == pytest.approx(dual["objective"], abs=1e-9) and not hasattr(model, "coef_")


def test_sparse_svc_multiclass_is_one_vs_rest_with_a_coef_row_per_class():
    X, y = load_iris(return_X_y=True)
    model = SparseSVC(s=30, tune_s=False).fit(X, y)
    assert model.coef_.shape == (3, 4) and model.decision_function(X).shape == (150, 3)
    for k in range(3):
        alone = SparseSVC(s=30, tune_s=False).fit(X, np.where(y == k, 1, 0))
        np.testing.assert_allclose(model.coef_[k], alone.coef_[0], atol=1e-10)
        assert model.intercept_[k] == pytest.approx(alone.intercept_[0], abs=1e-10)
    np.testing.assert_array_equal(model.predict(X), np.argmax(X @ model.coef_.T + model.intercept_, axis=1))


def test_sparse_svc_pickles_and_predicts_the_same():
    X, labels = linear_data(500, 3, seed=6)
    model = SparseSVC(s=40).fit(X, labels)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.decision_function(X), model.decision_function(X))


def test_sparse_svc_max_iter_warns_with_the_residual_reached():
    X, labels = linear_data(2000, 5, seed=7)
    with pytest.warns(ConvergenceWarning, match="stationarity_residual"):
        model = SparseSVC(s=100, tune_s=False, max_iter=1).fit(X, labels)
    assert not model.converged_


@pytest.mark.parametrize("bad, name", [(dict(C=0.0), "C"), (dict(c=1.0), "c=1.0"), (dict(s=0), "s"),
                                       (dict(s=10_000), "s=10000"), (dict(kernel="poly"), "kernel"),
                                       (dict(jacobian="true"), "jacobian"), (dict(sigma=0.5), "sigma"),
                                       (dict(init="zeros"), "init"), (dict(beta=-1.0), "beta")])
def test_sparse_svc_bad_parameters_are_named(bad, name):
    X, labels = linear_data(100, 3, seed=8)
    with pytest.raises(ValueError, match=name):
        SparseSVC(**bad).fit(X, labels)


def test_sparse_svc_warns_for_parameters_it_does_not_use():
    X, labels = linear_data(200, 3, seed=9)
    for params, name in [(dict(gamma=0.3), "gamma"), (dict(cache_size=50.0), "cache_size"),
                         (dict(tune_s=False, sigma=1.5), "sigma"), (dict(s=30, beta=0.9), "beta")]:
        with pytest.warns(UserWarning, match=f"{name}="):
            SparseSVC(**params).fit(X, labels)


def test_sparse_svc_reference_heuristics_warns_when_its_model_is_not_stationary():
    X, labels = linear_data(3000, 5, seed=10)
    with pytest.warns(ConvergenceWarning, match="reference_heuristics=True returns the reference code's model"):
        model = SparseSVC(reference_heuristics=True).fit(X, labels)
    y = np.where(labels == model.classes_[1], 1.0, -1.0)
    assert model.solver_results_[0].info["code_accuracy"] == pytest.approx(
        np.mean(np.sign(X @ model.coef_[0] + model.intercept_[0]) == y))


# ---- SVCPath: the SVM regularization path as an estimator --------------------------------------------------------
from sklearn.svm import SVC  # noqa: E402

from klrlab import SVCPath  # noqa: E402


@parametrize_with_checks([SVCPath(), SVCPath(kernel="linear", factorization="svd", lambda_max=1e2, lambda_min=1e-1)])
def test_svcpath_sklearn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("kernel", ["rbf", "precomputed"])
def test_svcpath_decisions_at_many_C_match_libsvm(kernel):
    X, y = make_twonorm(120, n_features=4, seed=8)
    Xt, _ = make_twonorm(50, n_features=4, seed=9)
    k = Kernel("rbf", gamma=0.3)
    Cs = np.logspace(-3.5, 2.5, 9)
    if kernel == "precomputed":
        model = SVCPath(kernel="precomputed").fit(k(X), y)
        scores = model.decision_function(k(Xt, X), C=Cs)
        svc = [SVC(C=C, kernel="precomputed", tol=1e-9).fit(k(X), y).decision_function(k(Xt, X)) for C in Cs]
    else:
        model = SVCPath(gamma=0.3).fit(X, y)
        scores = model.decision_function(Xt, C=Cs)
        svc = [SVC(C=C, gamma=0.3, tol=1e-9).fit(X, y).decision_function(Xt) for C in Cs]
    assert scores.shape == (50, 9) and model.converged_ and model.certificate_.satisfied
    np.testing.assert_allclose(scores, np.column_stack(svc), atol=1e-5 * max(1, np.abs(svc).max()))


def test_svcpath_default_model_is_the_svm_at_its_C():
    X, y = make_twonorm(100, n_features=4, seed=2)
    model = SVCPath(C=3.0, gamma=0.3).fit(X, y)
    svc = SVC(C=3.0, gamma=0.3, tol=1e-9).fit(X, y)
    np.testing.assert_allclose(model.decision_function(X), svc.decision_function(X), atol=1e-6)
    np.testing.assert_allclose(model.decision_function(X, C=3.0), model.decision_function(X), atol=1e-10)
    assert (model.predict(X) == svc.predict(X)).all()
    assert set(model.support_) == set(svc.support_)


def test_svcpath_predict_at_an_array_of_C_gives_one_column_each():
    X, y = make_twonorm(80, n_features=3, seed=4)
    y = np.where(y > 0, "yes", "no")
    model = SVCPath(gamma=0.5).fit(X, y)
    labels = model.predict(X, C=[0.01, 1.0, 100.0])
    assert labels.shape == (80, 3) and set(np.unique(labels)) <= {"yes", "no"}
    np.testing.assert_array_equal(labels[:, 1], model.predict(X, C=1.0))
    path = model.path_
    assert {"lambda", "C", "alpha_hat", "alpha0_hat", "sets", "event", "exact"} <= set(path)
    assert path["C"][0] == pytest.approx(1e-4) and path["C"][-1] == pytest.approx(1e3)
    assert (np.diff(path["C"]) >= 0).all() and path["alpha_hat"].shape == (len(path["C"]), 80)


def test_svcpath_handles_duplicate_points():
    X, y = make_twonorm(60, n_features=4, seed=2)
    X, y = np.r_[X, X[:25]], np.r_[y, y[:25]]
    model = SVCPath(gamma=0.5).fit(X, y)
    svc = SVC(C=50.0, gamma=0.5, tol=1e-9).fit(X, y)
    assert model.converged_ and model.solver_results_[0].info["max_nullity"] > 0
    np.testing.assert_allclose(model.decision_function(X, C=50.0), svc.decision_function(X), atol=1e-5)


@pytest.mark.parametrize("C", [1e-5, 1e4, np.nan, [1.0, 1e6]])
def test_svcpath_a_C_outside_the_path_is_refused(C):
    X, y = make_twonorm(40, n_features=2, seed=1)
    model = SVCPath().fit(X, y)
    with pytest.raises(ValueError, match=r"C=.*every C must lie in the path's range"):
        model.predict(X, C=C)


@pytest.mark.parametrize("bad,name", [(dict(C=1e5), "C"), (dict(lambda_min=1e5), "lambda_min"),
                                      (dict(factorization="lu"), "factorization"), (dict(kkt_tol=0.0), "kkt_tol"),
                                      (dict(lambda_max=-1.0), "lambda_max")])
def test_svcpath_bad_parameters_are_named(bad, name):
    X, y = make_twonorm(40, n_features=2, seed=1)
    with pytest.raises(ValueError, match=name):
        SVCPath(**bad).fit(X, y)

def test_svcpath_a_tight_kkt_tol_tightens_the_backup_instead_of_failing():
    # kkt_tol = 1e-8 used to be refused, naming backup_tol, a parameter SVCPath does not have
    from sklearn.datasets import make_classification
    X, y = make_classification(80, 4, random_state=0)
    model = SVCPath(kkt_tol=1e-8).fit(X, y)
    assert model.converged_ and model.certificate_.value <= 1e-8


@pytest.mark.parametrize("kkt_check, remedy", [(False, "set kkt_check=True"), (True, "loosen kkt_tol")])
def test_svcpath_a_violation_above_kkt_tol_names_svcpaths_own_remedy(kkt_check, remedy, monkeypatch):
    import klrlab.solvers.path as path_module
    from sklearn.datasets import make_classification
    X, y = make_classification(80, 4, random_state=0)
    monkeypatch.setattr(path_module, "MAX_RESTARTS", 0)   # with restarts the path reaches 1e-12 here
    with pytest.warns(ConvergenceWarning, match=f"reached lambda_min with a KKT violation .*{remedy}") as caught:
        SVCPath(kkt_tol=1e-12, kkt_check=kkt_check).fit(X, y)
    assert not any("max_iter" in str(w.message) for w in caught)


def test_svcpath_restarts_where_its_fresh_certificate_fails_and_then_holds_kkt_tol():
    from sklearn.datasets import make_classification
    X, y = make_classification(80, 4, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = SVCPath(kkt_tol=1e-12).fit(X, y)
    result = model.solver_results_[0]
    assert model.converged_ and model.certificate_.value <= 1e-12 and result.info["restarts"] >= 1


def test_svcpath_a_tolerance_below_float64s_reach_is_named_as_such():
    from sklearn.datasets import make_classification
    X, y = make_classification(80, 4, random_state=0)
    with pytest.warns(ConvergenceWarning, match="rounding floor of its scores.*loosen kkt_tol"):
        model = SVCPath(kkt_tol=1e-13, C=1e-3).fit(X, y)        # a well-scaled kernel (entries <= 1)
    assert not model.converged_


@pytest.mark.parametrize("kernel", ["rbf", "precomputed"])
def test_svcpath_multiclass_is_libsvm_one_vs_one_at_every_C(kernel):
    from sklearn.preprocessing import StandardScaler
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    k = Kernel("rbf", gamma=0.5)
    fit_X, test_X, svc_kw = (k(X), k(X[::3], X), dict(kernel="precomputed")) if kernel == "precomputed" else (
        X, X[::3], dict(gamma=0.5))
    model = SVCPath(C=2.0, **svc_kw).fit(fit_X, labels)
    assert model.__sklearn_tags__().classifier_tags.multi_class
    assert isinstance(model.path_, list) and len(model.path_) == 3                 # one path per pair of classes
    Cs = np.array([0.01, 1.0, 2.0, 100.0])
    votes, predicted = model.decision_function(test_X, C=Cs), model.predict(test_X, C=Cs)
    assert votes.shape == (50, 3, 4) and predicted.shape == (50, 4)
    for j, C in enumerate(Cs):
        svc = SVC(C=C, tol=1e-9, **svc_kw).fit(fit_X, labels)
        np.testing.assert_allclose(votes[:, :, j], svc.decision_function(test_X), atol=1e-5)
        np.testing.assert_array_equal(predicted[:, j], svc.predict(test_X))
    np.testing.assert_allclose(model.decision_function(test_X), votes[:, :, 2], atol=1e-9)   # the model's own C
    np.testing.assert_array_equal(model.predict(test_X, C=2.0), model.predict(test_X))


def test_cv_path_needs_two_classes():
    from klrlab.svm import cv_path
    X, y = load_iris(return_X_y=True)
    with pytest.raises(ValueError, match="3 classes; cv_path takes two"):
        cv_path(SVCPath(), X, y)


@pytest.mark.parametrize("kernel", ["rbf", "precomputed"])
def test_cv_path_reproduces_grid_search_at_its_C_values(kernel):
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    from klrlab.svm import cv_path
    X, y = make_twonorm(150, n_features=6, seed=12)
    y = np.where(np.random.default_rng(0).random(150) < 0.1, -y, y)             # label noise: C matters
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    C_grid = np.logspace(-4, 3, 30)
    k = Kernel("rbf", gamma=0.1)
    if kernel == "precomputed":
        exact = cv_path(SVCPath(kernel="precomputed"), k(X), y, cv=folds)
        grid = GridSearchCV(SVC(kernel="precomputed", tol=1e-9), {"C": C_grid}, cv=folds).fit(k(X), y)
    else:
        exact = cv_path(SVCPath(gamma=0.1), X, y, cv=folds)
        grid = GridSearchCV(SVC(gamma=0.1, tol=1e-9), {"C": C_grid}, cv=folds).fit(X, y)
    assert exact["n_paths"] == 5
    np.testing.assert_allclose(exact["C_from"][1:], exact["C_to"][:-1])            # contiguous intervals
    assert exact["C_from"][0] == pytest.approx(1e-4) and exact["C_to"][-1] == pytest.approx(1e3)
    at_grid = np.searchsorted(exact["C_to"], C_grid, side="left")
    same = np.isclose(exact["error"][at_grid], 1 - grid.cv_results_["mean_test_score"])
    assert same.all()
    assert exact["best_error"] <= 1 - grid.best_score_ + 1e-12
    assert exact["best_error"] == pytest.approx(exact["error"].min())


def test_sign_changes_are_where_the_decision_crosses_zero():
    from klrlab.svm import _decision_path, _sign_changes
    lam = np.array([4.0, 2.0, 1.0])
    g = np.array([[1.0, -3.0, -5.0], [-1.0, -1.0, 2.0], [1.0, 2.0, 3.0]])
    np.testing.assert_allclose(_sign_changes(lam, g), [3.5, 5 / 3])      # a quarter of the way, a third of the way
    X, y = make_twonorm(120, n_features=4, seed=5)
    model = SVCPath(gamma=0.2).fit(X[:80], y[:80])
    lam_path = model.path_["lambda"]
    crossings = _sign_changes(lam_path, _decision_path(model, X[80:]))
    assert len(crossings) > 5
    for point in range(40):                                                  # each crossing: f = 0 there
        mine = _sign_changes(lam_path, _decision_path(model, X[80 + point:81 + point]))
        if len(mine): assert np.abs(model.decision_function(X[80 + point:81 + point], 1 / mine)).max() < 1e-8


# ---- found by an audit ------------------------------------------------------------------------------------------

def test_an_ill_conditioned_kernel_stops_the_path_at_once_with_a_reason():
    import time
    from klrlab import SVCPath
    rng = np.random.RandomState(0)
    X = rng.normal(loc=100, size=(80, 2)); y = rng.randint(0, 2, 80)       # poly kernel entries near 1e12
    start = time.perf_counter()
    with pytest.raises(ValueError, match="too ill-conditioned for the exact path"):
        SVCPath(kernel="poly").fit(X, y)
    assert time.perf_counter() - start < 60                             # was a stall of about half an hour


def _path_data():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(60, 2))
    return X, (X[:, 0] + 0.4 * rng.normal(size=60) > 0).astype(int)


def test_a_truncated_path_names_max_breakpoints_and_cv_path_covers_what_every_fold_reached():
    import warnings
    from sklearn.exceptions import ConvergenceWarning
    from klrlab import SVCPath
    from klrlab.svm import cv_path
    X, y = _path_data()
    with pytest.raises(ValueError, match="C=1.0 lies beyond where the path stopped.*increase max_breakpoints"):
        SVCPath(gamma=0.5, max_breakpoints=5).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.warns(ConvergenceWarning, match="the curve covers C up to"):
            curve = cv_path(SVCPath(gamma=0.5, C=1e-4, max_breakpoints=30), X, y)
    assert np.all(np.isfinite(curve["error"])) and curve["C_to"].max() < 1e3


def test_cv_path_takes_a_column_y_and_decision_function_refuses_a_string_C():
    from klrlab import SVCPath
    from klrlab.svm import cv_path
    X, y = _path_data()
    with pytest.warns(UserWarning, match="column-vector y"):
        column = cv_path(SVCPath(gamma=0.5), X, y[:, None])
    np.testing.assert_array_equal(column["error"], cv_path(SVCPath(gamma=0.5), X, y)["error"])
    with pytest.raises(ValueError, match="give a number"):
        SVCPath(gamma=0.5).fit(X, y).decision_function(X, C="1")


def test_sparse_svc_refuses_a_fixed_single_point_and_forgets_a_linear_fits_weights():
    from sklearn.exceptions import NotFittedError
    from klrlab import FrankWolfeSVC, SparseSVC
    X, y = _path_data()
    with pytest.raises(ValueError, match="s=1 with tune_s=False"):
        SparseSVC(s=1, tune_s=False).fit(X, y)
    model = SparseSVC().fit(X, y)
    assert hasattr(model, "coef_")
    assert not hasattr(model.set_params(kernel="rbf").fit(X, y), "coef_")
    for unfitted, attribute in ((SparseSVC(), "n_support_vectors_"), (SparseSVC(), "sparsity_level_"),
                                (FrankWolfeSVC(), "dual_gap_")):
        with pytest.raises(NotFittedError):
            getattr(unfitted, attribute)


def test_one_vs_one_ties_follow_libsvm_unless_break_ties():
    from sklearn.svm import SVC

    from klrlab import SVCPath
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(53, 2)), np.array(list("abcd"))[np.arange(53) % 4]   # random labels: many tied votes
    X_test = rng.normal(size=(2000, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        path = SVCPath(C=50.0, gamma=0.5, lambda_max=1e2, lambda_min=1e-2).fit(X, y)
    votes = np.rint(path.decision_function(X_test))
    assert np.mean((votes == votes.max(1, keepdims=True)).sum(1) > 1) > 0.05          # the rule matters here
    for break_ties in (False, True):
        anchor = SVC(C=50.0, gamma=0.5, tol=1e-8, break_ties=break_ties).fit(X, y)
        path.set_params(break_ties=break_ties)
        np.testing.assert_array_equal(path.predict(X_test), anchor.predict(X_test))
        np.testing.assert_array_equal(path.predict(X_test, C=[50.0])[:, 0], anchor.predict(X_test))
    fw = FrankWolfeSVC(C=50.0, gamma=0.5, random_state=0).fit(X, y)
    first = fw.classes_[np.argmax(np.rint(fw.decision_function(X_test)), axis=1)]      # the first of the tied classes
    np.testing.assert_array_equal(fw.predict(X_test), first)


def test_path_cut_short_by_max_breakpoints_says_it_stopped_early_not_that_it_failed():
    X, y = make_twonorm(80, n_features=3, seed=4)
    with pytest.warns(ConvergenceWarning) as caught:
        SVCPath(max_breakpoints=2, C=1e-4).fit(X, y)
    message = str(caught[0].message)
    assert "stopped early after 1 iterations" in message and "increase max_breakpoints" in message
    assert "did not converge" not in message


def test_sparse_svc_warns_when_it_predicts_one_class_on_its_training_data():
    from sklearn.datasets import make_classification
    from klrlab import SparseSVC
    from klrlab.base import ConstantModelWarning
    # a seed where the RBF variant's rule (67) stops at a constant classifier (s = 31 of 60 points)
    X, y = make_classification(n_samples=60, n_features=4, n_informative=3, n_redundant=0, n_clusters_per_class=1,
                               random_state=0)
    with pytest.warns(ConstantModelWarning, match=r"predicts one class .* \(final s = 31\): .*rule \(67\)"):
        model = SparseSVC(kernel="rbf").fit(X, y)
    assert len(np.unique(model.predict(X))) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConstantModelWarning)
        assert SparseSVC(kernel="rbf").fit(X, 1 - y).score(X, 1 - y) > 0.9


def test_sparse_svc_one_class_at_the_optimum_says_so_not_rule_67():
    # a stress audit: at C = 1e-6 with s = m the one-class model is the convex problem's optimum, and the warning
    # blamed the rule (67) and a larger s
    from sklearn.datasets import make_classification
    from klrlab import SparseSVC
    from klrlab.base import ConstantModelWarning
    X, y = make_classification(100, 4, random_state=0, weights=[0.7])
    with pytest.warns(ConstantModelWarning, match="with s = m its Newton iterate is stationary.*a larger C") as caught:
        model = SparseSVC(C=1e-6, s=100, kernel="rbf").fit(X, y)
    assert model.converged_ and not any("rule (67)" in str(w.message) for w in caught)


@pytest.mark.parametrize("params, reason", [
    (dict(s=3, tune_s=False), "stationary point of the fixed budget s"),     # rule (67) belongs to tune_s=True
    (dict(max_iter=1, tol=1e-300), "stopped at max_iter"),
])
def test_sparse_svc_one_class_warning_names_what_stopped_it(params, reason):
    X = np.random.default_rng(0).random((8, 2))
    y = np.array([0, 0, 0, 0, 0, 1, 1, 1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SparseSVC(**params).fit(X, y)
    one_class = [str(w.message) for w in caught if "predicts one class" in str(w.message)]
    assert len(one_class) == 1 and reason in one_class[0] and "rule (67)" not in one_class[0]


def test_sparse_svc_reports_the_eta_its_certificate_holds_at():
    from sklearn.datasets import make_classification
    X, y = make_classification(n_samples=120, n_features=4, n_informative=3, n_redundant=0, random_state=0)
    model = SparseSVC(s=10, tune_s=False).fit(X, y)
    assert model.eta_ <= 1 / len(y) and model.eta_ == model.solver_results_[0].info["eta"]
    assert SparseSVC(eta=1e-3).fit(X, y).eta_ <= 1e-3                 # halved only on a stall, never raised
    X3, y3 = make_classification(n_samples=150, n_features=4, n_informative=3, n_redundant=0, n_classes=3,
                                 random_state=0)
    assert SparseSVC().fit(X3, y3).eta_.shape == (3,)
