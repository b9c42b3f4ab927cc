import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

from klrlab.base import Certificate, SolverResult
from klrlab.kernels import Kernel, rbf_kernel

from conftest import GeometricMeanClassifier, KernelMeanClassifier, mean_classifier_solution


@parametrize_with_checks([KernelMeanClassifier(), GeometricMeanClassifier(),
                          KernelMeanClassifier(kernel="linear"), GeometricMeanClassifier(kernel="laplacian")])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_certificate_and_result_invariant():
    assert Certificate("dual_gap", 1e-9, 1e-8).satisfied
    assert not Certificate("dual_gap", float("nan"), 1e-8).satisfied
    assert "dual_gap = 0.1 (> tol 0.001)" in str(Certificate("dual_gap", 0.1, 1e-3))
    with pytest.raises(ValueError, match="cannot be converged while its certificate fails"):
        SolverResult(np.zeros(2), 0.0, Certificate("kkt_violation", 1.0, 1e-6), 3, 0, converged=True)
    r = SolverResult([1, 2], 0.5, Certificate("kkt_violation", 1.0, 1e-6), 3, 0, converged=False)
    assert r.alpha.dtype == np.float64 and r.trace_frame().empty


@pytest.mark.parametrize("labels", [(0, 1), (-1, 1), (3, 7), ("ham", "spam"), (True, False)])
def test_labels_map_to_pm1_and_back(blobs, labels):
    X, y01 = blobs
    y = np.array(labels, dtype=object if isinstance(labels[0], str) else None)[y01]
    clf = KernelMeanClassifier(gamma=0.5).fit(X, y)
    assert list(clf.classes_) == sorted(set(labels))
    pred = clf.predict(X)
    assert set(pred) <= set(labels) and (pred == y).mean() > 0.9
    # classes_[1] is the +1 class: positive decision values predict it
    f = clf.decision_function(X)
    assert np.all(pred[f > 0] == clf.classes_[1]) and np.all(pred[f <= 0] == clf.classes_[0])


def test_binary_fit_matches_the_closed_form(blobs):
    X, y = blobs
    clf = KernelMeanClassifier(gamma=0.5).fit(X, y)
    K = rbf_kernel(X, gamma=0.5)
    alpha, bias = mean_classifier_solution(np.where(y == 1, 1.0, -1.0), K)
    np.testing.assert_allclose(clf.dual_coef_[0], (alpha * np.where(y == 1, 1, -1))[clf.support_], rtol=1e-12)
    np.testing.assert_allclose(
        clf.decision_function(X[:5]), K[:5] @ (alpha * np.where(y == 1, 1, -1)) + bias, rtol=1e-10
    )
    assert clf.dual_coef_.shape == (1, 60) and clf.intercept_.shape == (1,)
    assert np.isscalar(clf.n_iter_) and clf.converged_ and clf.certificate_.value == 0.0 and clf.certificate_.tol == 0.0
    assert list(clf.n_support_) == [30, 30] and clf.support_vectors_.shape == (60, 2)


def test_one_vs_rest(blobs):
    X, y = blobs
    rng = np.random.default_rng(1)
    X3 = np.r_[X, rng.normal([0, 5], 1, (30, 2))]
    y3 = np.r_[y, [2] * 30]
    clf = GeometricMeanClassifier(gamma=0.5).fit(X3, y3)
    scores = clf.decision_function(X3)
    assert scores.shape == (90, 3) and clf.dual_coef_.shape == (3, 90) and clf.intercept_.shape == (3,)
    assert clf.n_iter_.shape == (3,) and clf.converged_.all() and clf.certificate_.satisfied
    assert (clf.predict(X3) == y3).mean() > 0.85
    # each column is the binary problem "class k vs rest"
    for k in range(3):
        binary = GeometricMeanClassifier(gamma=0.5).fit(X3, np.where(y3 == k, 1, 0))
        np.testing.assert_allclose(scores[:, k], binary.decision_function(X3), rtol=1e-9, atol=1e-12)


def test_the_reported_certificate_is_the_worst_problem_s():
    from klrlab.base import _worst
    met, missed, far = Certificate("kkt_violation", 1e-4, 1e-3), Certificate("kkt_violation", 2e-3, 1e-3), \
        Certificate("kkt_violation", 0.5, 1.0)
    assert _worst([met, missed, far]) is missed              # by the excess over its own tolerance, not the value
    assert np.isnan(_worst([met, Certificate("kkt_violation", np.nan, 1e-3), missed]).value)


class PairwiseMeanClassifier(KernelMeanClassifier):
    _multiclass = "ovo"


@pytest.mark.parametrize("kernel", ["rbf", "precomputed"])
def test_one_vs_one(blobs, kernel):
    "Each pair's problem is the binary classifier of its two classes alone; the prediction is the pairs' max-wins vote."
    from sklearn.utils.multiclass import _ovr_decision_function
    X, y = blobs
    rng = np.random.default_rng(1)
    X3 = np.r_[X, rng.normal([0, 5], 1, (30, 2))]
    y3 = np.r_[y, [2] * 30]
    K3 = rbf_kernel(X3, X3, 0.5)
    fit_X = K3 if kernel == "precomputed" else X3
    clf = PairwiseMeanClassifier(kernel=kernel, gamma=0.5).fit(fit_X, y3)
    assert clf.dual_coef_.shape == (3, 90) and clf.intercept_.shape == (3,) and len(clf.solver_results_) == 3
    pair_scores = []
    for k, (a, b) in enumerate([(0, 1), (0, 2), (1, 2)]):
        rows = np.isin(y3, (a, b))
        binary = KernelMeanClassifier(gamma=0.5).fit(X3[rows], np.where(y3[rows] == a, 1, 0))
        pair_scores.append(binary.decision_function(X3))
        assert not clf.dual_coef_[k][~rows].any()                    # a pair's model uses its two classes only
    pair_scores = np.column_stack(pair_scores)
    expected = _ovr_decision_function(pair_scores < 0, -pair_scores, 3)
    np.testing.assert_allclose(clf.decision_function(fit_X), expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(clf.predict(fit_X), np.argmax(expected, axis=1))
    assert (clf.predict(fit_X) == y3).mean() > 0.85


def test_kernel_cache_shared_across_one_vs_rest(blobs):
    X, y = blobs
    X3, y3 = np.r_[X, X[:10] + 5], np.r_[y, [2] * 10]
    clf = KernelMeanClassifier(gamma=0.5).fit(X3, y3)
    # the first problem computes every row, the next two find them cached
    assert list(clf.n_kernel_evals_) == [70 * 70, 0, 0]


def test_precomputed_equals_explicit_kernel(blobs):
    X, y = blobs
    k = Kernel("rbf", gamma=0.5)
    explicit = KernelMeanClassifier(gamma=0.5).fit(X, y)
    pre = KernelMeanClassifier(kernel="precomputed").fit(k(X), y)
    np.testing.assert_allclose(pre.decision_function(k(X[:9], X)), explicit.decision_function(X[:9]), rtol=1e-12)
    assert pre.__sklearn_tags__().input_tags.pairwise and not explicit.__sklearn_tags__().input_tags.pairwise
    with pytest.raises(ValueError, match="features"):
        pre.predict(k(X[:9], X[:50]))  # must be the kernel against all 60 training points


@pytest.mark.parametrize("params,match", [
    (dict(C=0.0), "'C' parameter"), (dict(C=-1.0), "'C' parameter"), (dict(tol=0.0), "'tol' parameter"),
    (dict(max_iter=0), "'max_iter' parameter"), (dict(kernel="gauss"), "'kernel' parameter"),
    (dict(gamma=0.0), "'gamma' parameter"), (dict(gamma="wide"), "'gamma' parameter"),
    (dict(degree=0), "'degree' parameter"), (dict(coef0=-0.5), "'coef0' parameter"),
    (dict(cache_size=0), "'cache_size' parameter"), (dict(warm_start="yes"), "'warm_start' parameter"),
])
def test_bad_parameters_name_the_parameter_and_range(blobs, params, match):
    X, y = blobs
    with pytest.raises(ValueError, match=match):
        GeometricMeanClassifier(**params).fit(X, y)


def test_bad_data(blobs):
    X, y = blobs
    clf = GeometricMeanClassifier()
    with pytest.raises(ValueError, match="NaN"):
        clf.fit(np.where(X > 2.5, np.nan, X), y)
    with pytest.raises(ValueError, match="infinity"):
        clf.fit(np.where(X > 2.5, np.inf, X), y)
    with pytest.raises(ValueError, match="at least 2 classes in y; got only one class: 1"):
        clf.fit(X, np.ones(len(y)))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        clf.fit(X, y[:-1])
    with pytest.raises(ValueError, match="Unknown label type"):
        clf.fit(X, np.linspace(0, 1, len(y)))
    with pytest.raises(ValueError, match="1 sample"):
        clf.fit(X[:1], y[:1])
    with pytest.raises(TypeError, match="dense data is required"):
        clf.fit(sp.csr_matrix(X), y)
    with pytest.raises(ValueError, match="Expected 2D array"):
        clf.fit(X[:, 0], y)
    fitted = GeometricMeanClassifier().fit(X, y)
    with pytest.raises(ValueError, match="X has 3 features, but GeometricMeanClassifier is expecting 2"):
        fitted.predict(np.c_[X, X[:, :1]])
    with pytest.raises(ValueError, match="NaN"):
        fitted.decision_function(np.full((2, 2), np.nan))


def test_not_fitted_error():
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        KernelMeanClassifier().predict(np.zeros((2, 2)))


def test_binary_only_estimators_refuse_three_classes(blobs):
    X, y = blobs

    class BinaryOnly(KernelMeanClassifier):
        _binary_only = True

    with pytest.raises(
        ValueError,
        match="Only binary classification is supported: BinaryOnly is a binary classifier and y has 3 classes",
    ):
        BinaryOnly().fit(np.r_[X, X[:5]], np.r_[y, [2] * 5])


def test_max_iter_warns_with_the_measure_reached(blobs):
    X, y = blobs
    with pytest.warns(
        ConvergenceWarning, match=r"did not converge in 3 iterations: kkt_violation = .* \(> tol 1e-06\)"
    ):
        clf = GeometricMeanClassifier(max_iter=3).fit(X, y)
    assert (
        not clf.converged_
        and clf.n_iter_ == 3
        and not clf.certificate_.satisfied
        and clf.certificate_.measure == "kkt_violation"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        GeometricMeanClassifier(max_iter=1000).fit(X, y)


def test_multiclass_warning_names_the_problem(blobs):
    X, y = blobs
    with pytest.warns(ConvergenceWarning, match=r"class 2 vs rest"):
        GeometricMeanClassifier(max_iter=2).fit(np.r_[X, X[:6] + 4], np.r_[y, [2] * 6])


def test_warm_start_resumes_from_the_previous_solution(blobs):
    X, y = blobs
    with pytest.warns(ConvergenceWarning):
        clf = GeometricMeanClassifier(max_iter=3, warm_start=True).fit(X, y)
    first = clf.certificate_.value
    with pytest.warns(ConvergenceWarning):
        clf.fit(X, y)  # continues: 3 more halvings
    assert clf.certificate_.value == pytest.approx(first * 2.0 ** -3, rel=1e-6)
    cold = GeometricMeanClassifier(max_iter=1000).fit(X, y)
    warm = GeometricMeanClassifier(max_iter=1000, warm_start=True)
    warm.fit(X, y)
    warm.fit(X, y)
    assert warm.n_iter_ == 0 < cold.n_iter_
    warm.fit(X[:40], y[:40])  # a different problem: starts cold
    assert warm.n_iter_ > 0


def test_pickle_roundtrip(blobs):
    X, y = blobs
    clf = GeometricMeanClassifier(gamma=0.5).fit(X, y)
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.decision_function(X), clf.decision_function(X))


def test_deterministic(blobs):
    X, y = blobs
    a = GeometricMeanClassifier().fit(X, y).decision_function(X)
    b = GeometricMeanClassifier().fit(X, y).decision_function(X)
    np.testing.assert_array_equal(a, b)


def test_plain_arrays_are_validated_as_scikit_learn_does(blobs):
    import pandas as pd
    X, y = blobs
    frame = pd.DataFrame(X, columns=["a", "b"])
    clf = GeometricMeanClassifier().fit(frame, y)
    assert list(clf.feature_names_in_) == ["a", "b"]
    plain = clf.fit(np.ascontiguousarray(X, dtype=np.float64), y)          # the fast path
    assert not hasattr(plain, "feature_names_in_") and plain.n_features_in_ == 2
    by_lists = GeometricMeanClassifier().fit(X.tolist(), y.tolist())        # scikit-learn's path
    assert np.array_equal(plain.decision_function(X), by_lists.decision_function(X))
    with pytest.raises(ValueError, match="Input y contains NaN"):
        GeometricMeanClassifier().fit(X, np.where(y == y[0], np.nan, 1.0))
    with pytest.raises(ValueError, match="Input X contains infinity"):
        GeometricMeanClassifier().fit(np.where(X > 2.5, np.inf, X).astype(np.float64), y)


def test_parameter_names_are_read_once_per_class_and_match_scikit_learn():
    "The cached names equal scikit-learn's own reading of each estimator's __init__, a subclass gets its own."
    from sklearn.base import BaseEstimator
    import klrlab.svm  # noqa: F401  (registers the SVM estimators as subclasses)
    from klrlab import KernelLogisticRegression
    from klrlab.base import BaseKernelClassifier

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    estimators = set(subclasses(BaseKernelClassifier))
    assert len(estimators) >= 6
    for cls in estimators:
        assert cls._get_param_names() == BaseEstimator._get_param_names.__func__(cls), cls

    class Narrower(KernelLogisticRegression):
        def __init__(self, C=1.0, tol=1e-3):
            super().__init__(C=C, tol=tol)

    assert Narrower._get_param_names() == ["C", "tol"] and Narrower().get_params() == {"C": 1.0, "tol": 1e-3}


def _numeric_parameters():
    "(estimator class, parameter) for every parameter of every estimator that takes a number and no bool."
    from numbers import Integral, Real

    import klrlab
    from sklearn.utils._param_validation import Interval
    pairs = []
    for name in sorted(klrlab._ESTIMATORS):
        cls = getattr(klrlab, name)
        for param, constraints in cls._parameter_constraints.items():
            if param not in cls().get_params(): continue          # a base's constraint the class does not take
            if "boolean" not in constraints and any(isinstance(c, Interval) and c.type in (Integral, Real)
                                                    for c in constraints):
                pairs.append((cls, param))
    return pairs


@pytest.mark.parametrize("cls, param", _numeric_parameters(), ids=lambda v: getattr(v, "__name__", v))
def test_a_bool_for_a_numeric_parameter_is_refused_by_name(cls, param):
    from sklearn.utils._param_validation import InvalidParameterError
    X = np.random.default_rng(0).normal(size=(20, 2))
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(InvalidParameterError, match=f"'{param}' parameter of {cls.__name__}.*Got True"):
        cls(**{param: True}).fit(X, y)


def _kernel_estimator_names():
    "Every estimator of the package that takes a kernel (all but the TemperatureScaled wrapper)."
    import klrlab
    return [name for name in sorted(klrlab._ESTIMATORS) if "kernel" in getattr(klrlab, name)().get_params()]


@pytest.mark.parametrize("name", _kernel_estimator_names())
@pytest.mark.parametrize("kernel, scale", [("rbf", 1e200), ("linear", 1e100)])
def test_features_whose_kernel_overflows_float64_are_refused_before_any_solve(blobs, name, kernel, scale):
    import klrlab
    X, y = blobs
    estimator = getattr(klrlab, name)(kernel=kernel, **({"gamma": 1.0} if kernel == "rbf" else {}))
    with pytest.raises(ValueError, match=f"the {kernel} kernel's .* overflow float64; scale the features"):
        estimator.fit(X * scale, y)
    assert not hasattr(estimator, "classes_")                  # refused before the model was touched


def test_a_solve_that_overflows_is_refused_and_leaves_no_model(blobs):
    class Overflowing(KernelMeanClassifier):
        def _solve_binary(self, X, y, kernel, cache, alpha0):
            result = super()._solve_binary(X, y, kernel, cache, alpha0)
            return SolverResult(np.where(np.arange(len(y)) == 3, np.inf, result.alpha), result.bias,
                                result.certificate, 1, 0, True)
    X, y = blobs
    model = Overflowing()
    with pytest.raises(ValueError, match="Overflowing: the solve overflowed float64"):
        model.fit(X, y)
    assert not hasattr(model, "dual_coef_") and not hasattr(model, "support_")


def test_decision_values_that_overflow_name_the_scale_of_X(blobs):
    X, y = blobs
    model = KernelMeanClassifier(kernel="linear").fit(X, y)
    with pytest.raises(ValueError, match="X gives decision values that overflow float64 .* 1e\\+308"):
        model.decision_function(np.array([[1e308, 1e308]]))
    # a far point under the Gaussian kernel is not an overflow: its kernel values are 0, its score the bias
    far = KernelMeanClassifier(gamma=1.0).fit(X, y).decision_function(np.array([[1e200, 1e200]]))
    assert np.isfinite(far).all()


def _entropy(alpha, C):
    "sum_i alpha_i log(alpha_i / C) + (C - alpha_i) log((C - alpha_i) / C), with 0 log 0 = 0."
    a, rest = alpha[alpha > 0], C - alpha[alpha < C]
    return (a * np.log(a / C)).sum() + (rest * np.log(rest / C)).sum()


@pytest.mark.parametrize("lam", [0.0, 0.3])
def test_objective_of_klr_is_its_dual_by_smo(data, lam):
    # the base page's table: KernelLogisticRegression's objective_ is the dual f(alpha) SMO minimises
    from klrlab.klr import KernelLogisticRegression
    X, y, _, _ = data
    model = KernelLogisticRegression(C=2.0, lam=lam, gamma=0.5, tol=1e-8).fit(X, y)
    alpha, yy = model.solver_results_[0].alpha, np.where(y == model.classes_[1], 1.0, -1.0)
    K = rbf_kernel(X, X, 0.5)
    dual = 0.5 * (alpha * yy) @ K @ (alpha * yy) + _entropy(alpha, 2.0) - lam * alpha.sum()
    assert np.isclose(model.objective_, dual, rtol=1e-10, atol=1e-10)


def test_objectives_of_the_sparse_klr_baselines_and_the_path(data):
    # HalfThresholdingKLR: its primal; ImportVectorMachine: H on its import vectors; SVCPath: no single objective
    from klrlab.klr import HalfThresholdingKLR, ImportVectorMachine
    from klrlab.svm import SVCPath
    X, y, _, _ = data
    yy = np.where(y == 1, 1.0, -1.0)
    log_loss_sum = lambda model, C: C * np.logaddexp(0, -yy * model.decision_function(X)).sum()
    half = HalfThresholdingKLR(C=3.0, gamma=0.5, max_iter=200).fit(X, y)
    assert np.isclose(half.objective_, log_loss_sum(half, 3.0) + np.sqrt(np.abs(half.dual_coef_)).sum(), rtol=1e-9)
    ivm = ImportVectorMachine(C=3.0, gamma=0.5).fit(X, y)
    beta, K_SS = ivm.dual_coef_[0], rbf_kernel(ivm.support_vectors_, ivm.support_vectors_, 0.5)
    assert np.isclose(ivm.objective_, 0.5 * beta @ K_SS @ beta + log_loss_sum(ivm, 3.0), rtol=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert np.isnan(SVCPath(gamma=0.5).fit(X, y).objective_)


def test_objectives_of_the_svms_are_their_duals(data):
    # FrankWolfeSVC: the ball's dual Delta^2 - alpha' Q~ alpha, Q~ = (y y') o (K + 1) + I / C, Delta^2 = max_i Q~_ii;
    # SparseSVC: Zhou's D(alpha) = 1/2 |sum_i alpha_i y_i x_i|^2 + 1/2 sum_i E_ii alpha_i^2 - sum_i alpha_i (linear)
    from klrlab.svm import FrankWolfeSVC, SparseSVC
    X, y, _, _ = data
    yy = np.where(y == 1, 1.0, -1.0)
    fw = FrankWolfeSVC(C=4.0, gamma=0.5).fit(X, y)
    alpha, K = fw.solver_results_[0].alpha, rbf_kernel(X, X, 0.5)
    Q = np.outer(yy, yy) * (K + 1.0) + np.eye(len(y)) / 4.0
    assert np.isclose(fw.objective_, Q.diagonal().max() - alpha @ Q @ alpha, rtol=1e-10)
    sparse = SparseSVC(C=0.25, s=30, tune_s=False).fit(X, y)
    alpha = sparse.solver_results_[0].alpha
    w = X.T @ (alpha * yy)
    E = np.where(alpha >= 0, 1 / 0.25, 1 / (0.25 / 100))
    assert np.isclose(sparse.objective_, 0.5 * w @ w + 0.5 * (E * alpha**2).sum() - alpha.sum(), rtol=1e-10)
