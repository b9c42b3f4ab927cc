"""Sparse KLR (Consolo et al.): independent oracles for lambda > 0 (stationarity recomputed from the kernel, the primal
(28) solved by SciPy + Newton, sufficient decrease (38)), lambda = 0 = KLR, Proposition 1, presets, sparsity, warm starts."""
import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.datasets import make_classification

from klrlab.kernels import Kernel
from klrlab.klr import PRESETS, KernelLogisticRegression
from klrlab.smo import solve_dual
from klrlab.sparse_klr import lambda_upper_bound


def problem(seed, n=120, imbalance=0.5):
    X, y = make_classification(n, 5, n_informative=3, weights=[imbalance], flip_y=0.05, random_state=seed)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    return X, np.where(y == 1, 1.0, -1.0)


def stationarity_violation(K, y, alpha, C, lam, lo, hi):
    "Largest violation of (24)-(25) over b, from alpha alone (gradient recomputed with K)."
    grad = y * (K @ (alpha * y)) + np.log(alpha / (C - alpha)) - lam
    t = -grad * y
    lower = np.r_[t[(alpha < hi) & (y > 0)], t[(alpha > lo) & (y < 0)]]
    upper = np.r_[t[(alpha < hi) & (y < 0)], t[(alpha > lo) & (y > 0)]]
    return max(0.0, lower.max() - upper.min())


def primal_28(K, y, C, nu):
    "(28) in eigen-coordinates by L-BFGS-B + Newton: decision values (scikit-learn sign) and rho."
    eig, V = np.linalg.eigh(K)
    Z = np.c_[V * np.sqrt(np.clip(eig, 0, None)), np.ones(len(y))]
    A = np.c_[-y[:, None] * Z, np.ones(len(y))]
    ridge = np.r_[np.ones(Z.shape[1] - 1), 0.0, 0.0]
    def value_grad(v):
        xi = A @ v
        return (0.5 * (ridge * v) @ v + C * np.logaddexp(0, xi).sum() - nu * v[-1],
                ridge * v + A.T @ (C * expit(xi)) - np.r_[np.zeros(len(v) - 1), nu])
    v = minimize(value_grad, np.zeros(A.shape[1]), jac=True, method="L-BFGS-B",
                 bounds=[(None, None)] * (A.shape[1] - 1) + [(0, None)], options=dict(maxiter=50_000, gtol=1e-12)).x
    for _ in range(30):
        curvature = C * expit(A @ v) * (1 - expit(A @ v))
        v = v - np.linalg.solve(np.diag(ridge) + (A.T * curvature) @ A + 1e-14 * np.eye(len(v)), value_grad(v)[1])
    return Z @ v[:-1], v[-1]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("C,lam", [(1.0, 0.3), (30.0, 10.0), (300.0, 300.0)])
@pytest.mark.parametrize("wss", ["first", "second"])
def test_stationarity_recomputed_independently(seed, C, lam, wss):
    X, y = problem(seed, imbalance=0.3)
    k = Kernel("rbf", gamma=0.5)
    res = solve_dual(k.cache(X), y, C, lam=lam, wss=wss, tol=1e-8, bound_eps=1e-5)
    assert res.converged
    violation = stationarity_violation(k(X), y, res.alpha, C, lam, res.info["lo"], res.info["hi"])
    assert violation <= 1e-8 and abs(violation - res.certificate.value) < 1e-9


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("C,lam", [(2.0, 0.5), (20.0, 6.0)])
def test_primal_28_agrees(seed, C, lam):
    X, y = problem(seed, n=80)
    k = Kernel("rbf", gamma=0.5)
    K = k(X)
    res = solve_dual(k.cache(X), y, C, lam=lam, tol=1e-10, bound_eps=1e-12)
    decision, rho = primal_28(K, y, C, res.alpha.sum())
    assert abs(rho - lam) < 1e-6 * max(1.0, lam)                       # Observation 1: rho = lambda
    np.testing.assert_allclose(K @ (res.alpha * y) + res.bias, decision, atol=1e-5)


@pytest.mark.parametrize("wss", ["first", "second"])
def test_sufficient_decrease_and_same_optimum(wss):
    X, y = problem(5, imbalance=0.35)
    k = Kernel("rbf", gamma=0.5)
    C = 50.0
    res = solve_dual(k.cache(X), y, C, lam=15.0, wss=wss, tol=1e-9, bound_eps=1e-5, trace=True)
    tr = res.trace_frame()
    f = tr.objective.to_numpy()
    required = (2 / C) * 2 * tr.step.to_numpy()[:-1] ** 2                 # (38), ||delta alpha||^2 = 2 t^2
    assert (f[:-1] - f[1:] >= required - 1e-9 * np.abs(f[1:])).all()
    other = solve_dual(k.cache(X), y, C, lam=15.0, wss="second" if wss == "first" else "first", tol=1e-9, bound_eps=1e-5)
    assert abs(res.objective - other.objective) <= 1e-8 * abs(other.objective)


def test_lambda_zero_is_klr():
    X, y = problem(7)
    sparse = KernelLogisticRegression.from_preset("KLR-2ord", C=5.0, gamma=0.5, tol=1e-9).fit(X, y)
    plain = KernelLogisticRegression(C=5.0, gamma=0.5, tol=1e-9).fit(X, y)
    assert sparse.support_fraction_ == 1.0 and sparse.lam_ == 0.0
    np.testing.assert_allclose(sparse._alpha_full[0], plain._alpha_full[0], atol=1e-6)


def test_sparsity_and_prediction_use_only_the_support():
    X, y = problem(8, n=200, imbalance=0.3)
    model = KernelLogisticRegression.from_preset("S-KLR-2ord", C=1e3, gamma=0.5).fit(X, y)
    alpha, lo = model._alpha_full[0], model.solver_results_[0].info["lo"]
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
    assert KernelLogisticRegression(C=4.0, gamma=0.5).fit(X, y).solver_results_[0].info["lo"] < 1e-11   # lam = 0: negligible


@pytest.mark.parametrize("C", [1.0, 10.0])
def test_proposition_1_bound(C):
    X, y = problem(10, n=60, imbalance=0.27)
    k = Kernel("rbf", gamma=0.5)
    lam_max = lambda_upper_bound(X, y, C, k)
    model = KernelLogisticRegression(C=C, kernel="precomputed", lam=lam_max, bound_eps=1e-5, bound_eps_mode="absolute", tol=1e-8)
    alpha = model.fit(k(X), y)._alpha_full[0]
    minority = -1.0 if (y < 0).sum() < (y > 0).sum() else 1.0
    assert (alpha[y == minority] >= C - 1e-5 - 1e-9).all()


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


def test_temperature_scaling_keeps_predict_and_repairs_overconfidence():
    from klrlab.sparse_klr import TemperatureScaled
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


def test_paper_subsolver_route_reaches_the_same_optimum_when_it_converges():
    from klrlab.sparse_klr import smo_scipy_newton_cg
    X, y = problem(13, n=80)
    k = Kernel("rbf", gamma=0.5)
    paper_route = smo_scipy_newton_cg(k(X), y, 10.0, lam=3.0, tol=1e-6)
    exact = solve_dual(k.cache(X), y, 10.0, lam=3.0, bound_eps=1e-5, tol=1e-9)
    assert paper_route["converged"] and paper_route["kkt_violation"] <= 1e-6
    np.testing.assert_allclose(paper_route["alpha"], exact.alpha, atol=1e-5 * 10.0)
