"""The sparse baselines: IVM's one-step values against a Newton step built from scratch, IVM = KLR with every point
imported (duplicates imported once), a monotone objective, the compiled loss loop against NumPy and its shape errors,
the half-thresholding operator against brute force, l1/2-KLR's monotone objective, its lockstep grid fit against fits one by
one, and clear errors."""
import pickle
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import expit
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from klrlab._baselines import add_candidate_losses
from klrlab.baselines import (HalfThresholdingKLR, ImportVectorMachine, _logistic_terms, _newton_fit, _objective, _one_step_values,
                              fit_half_thresholding_many, half_threshold)
from klrlab.kernels import Kernel
from klrlab.klr import KernelLogisticRegression


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(160, 4, n_informative=3, n_redundant=0, flip_y=0.05, random_state=0)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    return X[:100], y[:100], X[100:], y[100:]


def newton_step_value(K, S, l, y, C, beta, b):
    "H after one Newton step on S + {l} from (beta, 0, b), with the enlarged problem's own gradient and Hessian."
    T = list(S) + [l]
    Phi = np.c_[K[:, T], np.ones(len(y))]
    Omega = np.zeros((len(T) + 1, len(T) + 1)); Omega[:-1, :-1] = K[np.ix_(T, T)]
    theta = np.r_[beta, 0.0, b]
    _, r, w = _logistic_terms(Phi @ theta, y, C)
    theta = theta - np.linalg.solve((Phi.T * w) @ Phi + Omega, Phi.T @ r + Omega @ theta)
    return _objective(K[np.ix_(T, T)], theta[:-1], Phi @ theta, y, C)


@pytest.mark.parametrize("m, C, block_rows", [(0, 1.0, 256), (1, 0.3, 256), (4, 3.0, 7), (12, 30.0, 1)])
def test_one_step_values_are_newton_steps(m, C, block_rows):
    rng = np.random.default_rng(m)
    X = rng.normal(size=(50, 3)); y = np.where(X[:, 0] + 0.7 * rng.normal(size=50) > 0, 1.0, -1.0)
    K = Kernel("rbf", gamma=0.4)(X)
    S = np.sort(rng.choice(50, m, replace=False)).astype(np.intp)
    beta, b, _ = _newton_fit(K[:, S], K[np.ix_(S, S)], y, C, np.zeros(m), 0.1)
    values = _one_step_values(K, S, y, C, beta, b, block_rows=block_rows)
    assert np.all(np.isinf(values[S]))
    for l in np.setdiff1d(np.arange(50), S):
        assert abs(values[l] - newton_step_value(K, S, l, y, C, beta, b)) <= 1e-9 * abs(values[l])


def test_ivm_imports_a_duplicated_point_once(data):
    X, y, Xt, _ = data
    X_dup, y_dup = np.r_[X[:30], X[:30:3]], np.r_[y[:30], y[:30:3]]
    ivm = ImportVectorMachine(C=3.0, gamma=0.5, tol=0.0).fit(X_dup, y_dup)
    klr = KernelLogisticRegression(C=3.0, gamma=0.5, tol=1e-10).fit(X_dup, y_dup)
    assert ivm.converged_ and ivm.n_import_ == 30 == len(np.unique(ivm.support_vectors_, axis=0))
    np.testing.assert_allclose(ivm.decision_function(Xt), klr.decision_function(Xt), atol=1e-6)


def test_candidate_loss_loop_matches_numpy_and_checks_shapes():
    rng = np.random.default_rng(1)
    K, Q = rng.random((9, 13)), rng.random((9, 13))
    base, y, step = rng.normal(size=9) * 30, np.where(rng.random(9) > 0.5, 1.0, -1.0), rng.normal(size=13) * 50
    out = np.full(13, 2.0)
    add_candidate_losses(K, Q, base, y, step, out)
    expected = 2.0 + np.logaddexp(0, -y[:, None] * (base[:, None] + step * (K - Q))).sum(0)
    np.testing.assert_allclose(out, expected, rtol=1e-13)
    for bad in (dict(Q=np.ascontiguousarray(Q[:, :12])), dict(base=base[:8]), dict(step=step[:12]), dict(out=out[:12])):
        args = dict(K=K, Q=Q, base=base, y=y, step=step, out=out) | bad
        with pytest.raises(ValueError, match="entries|shape"):
            add_candidate_losses(args["K"], args["Q"], args["base"], args["y"], args["step"], args["out"])


@pytest.mark.parametrize("blas_threads", [1, None])
@pytest.mark.parametrize("C", [0.5, 5.0])
def test_ivm_with_every_point_is_klr(data, C, blas_threads):
    X, y, Xt, _ = data
    with threadpool_limits(blas_threads):          # rounding differs with the threads; with an explicit inverse, one thread stopped at 77 points
        ivm = ImportVectorMachine(C=C, gamma=0.5, tol=0.0).fit(X, y)
    klr = KernelLogisticRegression(C=C, gamma=0.5, tol=1e-10).fit(X, y)
    # tol = 0: import until no point lowers H or adds to the span (this K has eigenvalues near 1e-10: 97 and 89 points, whatever the BLAS threads)
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
            m = HalfThresholdingKLR(C=C, gamma=0.5, max_iter=2000, step="fixed").fit(X, y)
        path = np.array(m.objective_path_)
        assert np.all(np.diff(path) <= 1e-9 * np.abs(path[1:]))         # the safe step 1/L descends at every iteration
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


def test_ivm_candidate_sample_scores_are_the_full_scores(data):
    X, y, _, _ = data
    K, yy = np.ascontiguousarray(Kernel("rbf", gamma=0.5)(X)), np.where(y > 0, 1.0, -1.0)
    S = np.array([4, 40, 77])
    beta, b, _ = _newton_fit(K[:, S], K[np.ix_(S, S)], yy, 3.0, np.zeros(3), 0.0)
    sample = np.array([0, 9, 41, 99])
    np.testing.assert_allclose(_one_step_values(K, S, yy, 3.0, beta, b, candidates=sample),
                               _one_step_values(K, S, yy, 3.0, beta, b)[sample], rtol=1e-12)


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
    "L ||theta - prox_{1/L}(theta - grad/L)||_inf for the fitted (beta, b), with L and the gradient rebuilt from the data."
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
    # the non-monotone reference no longer ends the run (it did at C = 1000 on wisconsin, at an objective 2.4x too high).
    from sklearn.datasets import load_breast_cancer
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        stopped = HalfThresholdingKLR(C=C, gamma=0.5).fit(X, y)
        if not stopped.converged_:
            assert stopped.n_iter_ == stopped.max_iter                     # the cap, and the estimator said so
            return
        longer = HalfThresholdingKLR(C=C, gamma=0.5, tol=0.0, max_iter=3 * stopped.n_iter_).fit(X, y)
    assert longer.objective_path_[-1] >= 0.98 * stopped.objective_path_[-1]


def test_half_thresholding_grid_in_lockstep_equals_fits_one_by_one(data):
    # Problems on a 95 % part and on all points, at three C: each must follow its own fit (the safe step is not chaotic).
    X, y, X_test, _ = data
    part = np.sort(np.random.default_rng(0).permutation(len(y))[:95])
    subsets = [part, np.arange(len(y))] * 3
    models = [HalfThresholdingKLR(C=C, gamma=0.5, step="fixed", max_iter=800) for C in (0.3, 3.0, 30.0) for _ in range(2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert fit_half_thresholding_many(models, X, y, subsets) == models
        alone = [HalfThresholdingKLR(C=m.C, gamma=0.5, step="fixed", max_iter=800).fit(X[rows], y[rows]) for m, rows in zip(models, subsets)]
    assert len({m.n_iter_ for m in models}) > 1                              # some stop early, others run on
    for m, a in zip(models, alone):
        assert m.n_iter_ == a.n_iter_ and m.converged_ == a.converged_ and np.array_equal(m.support_, a.support_)
        assert np.allclose(m.objective_path_, a.objective_path_, rtol=1e-9)
        assert np.allclose(m.decision_function(X_test), a.decision_function(X_test), rtol=1e-7, atol=1e-9)
        assert np.isclose(m.prox_gradient_norm_, a.prox_gradient_norm_, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("models, subsets, message", [
    ([HalfThresholdingKLR(gamma=0.5), HalfThresholdingKLR(gamma=0.5)], [np.arange(10)], "one array of row indices per model"),
    ([HalfThresholdingKLR(gamma=0.5)] * 2, None, "each estimator may appear once"),
    ([HalfThresholdingKLR(gamma=0.5)], [np.array([0, 1, 1])], "distinct row indices"),
    ([HalfThresholdingKLR(gamma=0.5)], [np.array([0, 100])], "distinct row indices"),
    ([HalfThresholdingKLR(gamma=0.5), HalfThresholdingKLR(gamma=0.5, step="fixed")], None, "differ only in C"),
    ([HalfThresholdingKLR(gamma=0.5), ImportVectorMachine(gamma=0.5)], None, "differ only in C"),
    ([HalfThresholdingKLR(), HalfThresholdingKLR()], [np.arange(50), np.arange(100)], "gamma as a number"),
    ([HalfThresholdingKLR(gamma=0.5), HalfThresholdingKLR(gamma=0.5)], "one class", "binary classifier; y has 1 class"),
    ([HalfThresholdingKLR(gamma=0.5), HalfThresholdingKLR(gamma=0.5)], "other classes", "same two classes"),
    ([HalfThresholdingKLR(gamma=0.5, C=-1.0)], None, "C"),
])
def test_half_thresholding_grid_bad_input(data, models, subsets, message):
    X, y, _, _ = data
    if subsets == "one class": subsets = [np.flatnonzero(y == 1)[:5], np.arange(len(y))]
    if subsets == "other classes": y = np.r_[y[:50], y[50:] + 1]; subsets = [np.arange(50), np.arange(50, 100)]   # {0, 1} and {1, 2}
    with pytest.raises(ValueError, match=message):
        fit_half_thresholding_many(models, X, y, subsets)
