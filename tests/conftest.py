"""Test doubles for the estimator base: small closed-form or geometric 'solvers' whose answers are known exactly;
and lab settings that keep a test's data in its own folders."""
import os

import numpy as np
import pytest
from hypothesis import settings
from sklearn.base import _fit_context
from sklearn.datasets import make_classification
from sklearn.utils._param_validation import Interval
from numbers import Real

from klrlab.base import BaseKernelClassifier, Certificate, SolverResult
from klrlab.config import Settings

# The property tests draw the same examples on every run, so `make test` passes or fails alike on every machine; a
# developer looking for new counterexamples runs `pytest --hypothesis-profile=explore` (or sets KLRLAB_HYPOTHESIS).
settings.register_profile("reproducible", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("KLRLAB_HYPOTHESIS", "reproducible"))


def settings_for(tmp_path, mirrors=(), data_home=None):
    "Lab settings whose data home (unless given) and output folder are in `tmp_path`, with only `mirrors`."
    return Settings(data_home=data_home or tmp_path / "cache", mirrors=tuple(mirrors), profile="quick", seed=0,
                    n_jobs=1, scheduler="local", out_dir=tmp_path / "out")


def mean_classifier_solution(y, K):
    "Dual coefficients and bias of the nearest-class-mean classifier in feature space."
    pos, neg = y > 0, y < 0
    alpha = np.where(pos, 1 / pos.sum(), 1 / neg.sum())
    bias = 0.5 * (K[np.ix_(neg, neg)].mean() - K[np.ix_(pos, pos)].mean())
    return alpha, bias


class KernelMeanClassifier(BaseKernelClassifier):
    "Nearest class mean in feature space: the base's contract with a closed-form 'solver'."

    def __init__(self, kernel="rbf", gamma="scale", degree=3, coef0=0.0, cache_size=200.0, warm_start=False):
        self.kernel, self.gamma, self.degree, self.coef0 = kernel, gamma, degree, coef0
        self.cache_size, self.warm_start = cache_size, warm_start

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        return self._fit(X, y)

    def _solve_binary(self, X, y, kernel, cache, alpha0):
        before = cache.n_kernel_evals
        alpha, bias = mean_classifier_solution(y, cache.get_rows(np.arange(len(y))))
        return SolverResult(alpha, bias, Certificate("residual", 0.0, 0.0), 1, cache.n_kernel_evals - before, True)


class GeometricMeanClassifier(BaseKernelClassifier):
    """Approaches the mean classifier's alpha geometrically (halving the error each iteration), from a warm
    start when given: exercises C, tol, max_iter, warm_start and the ConvergenceWarning path."""

    _parameter_constraints = {
        **BaseKernelClassifier._parameter_constraints,
        "rate": [Interval(Real, 0, 1, closed="neither")],
    }

    def __init__(self, C=1.0, kernel="rbf", gamma="scale", degree=3, coef0=0.0, tol=1e-6, max_iter=1000,
                 cache_size=200.0, warm_start=False, rate=0.5):
        self.C, self.kernel, self.gamma, self.degree, self.coef0 = C, kernel, gamma, degree, coef0
        self.tol, self.max_iter, self.cache_size, self.warm_start, self.rate = (
            tol,
            max_iter,
            cache_size,
            warm_start,
            rate,
        )

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        return self._fit(X, y)

    def _solve_binary(self, X, y, kernel, cache, alpha0):
        target, bias = mean_classifier_solution(y, cache.get_rows(np.arange(len(y))))
        alpha = np.zeros_like(target) if alpha0 is None else alpha0.copy()
        n_iter, gap = 0, np.abs(alpha - target).max()
        while gap > self.tol and n_iter < self.max_iter:
            alpha += self.rate * (target - alpha)
            gap = np.abs(alpha - target).max()
            n_iter += 1
        cert = Certificate("kkt_violation", gap, self.tol)
        return SolverResult(alpha, bias, cert, n_iter, 0, cert.satisfied)


@pytest.fixture
def blobs():
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(-1.5, 1, (30, 2)), rng.normal(1.5, 1, (30, 2))]
    y = np.array([0] * 30 + [1] * 30)
    return X, y


def problem(seed, n=120, imbalance=0.5):
    "A small binary problem with labels -1/+1 and features scaled to [0, 1] (weights: the share of the -1 class)."
    X, y = make_classification(n, 5, n_informative=3, weights=[imbalance], flip_y=0.05, random_state=seed)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    return X, np.where(y == 1, 1.0, -1.0)


@pytest.fixture(scope="module")
def data():
    "100 training and 60 test points of a 4-feature binary problem (labels 0/1), features scaled to [0, 1]."
    X, y = make_classification(160, 4, n_informative=3, n_redundant=0, flip_y=0.05, random_state=0)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    return X[:100], y[:100], X[100:], y[100:]
