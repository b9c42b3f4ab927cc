"""Zhou's Newton sparse SVM: the SciPy dual (6) and primal (4) oracles at s = m, the NumPy reference step for step, the
stationarity conditions (95) at exit, nnz(alpha) <= s along the way, Theorem 3.1's one step, dense = CSR, the kernel
variant, Algorithm 2's growth of s, and bad input."""
import math

import numpy as np
import pytest
import scipy.sparse as sp

from klrlab.kernels import Kernel
from klrlab.reference import nssvm_dual_scipy, nssvm_primal_scipy, reference_nssvm
from klrlab.solvers.nssvm import (JACOBIANS, balanced_working_set, default_tolerance, solve_nssvm, sparsity_level,
                                  top_s)


def linear_problem(m, n, noise=1.0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, n))
    return X, np.where(X @ rng.normal(size=n) + noise * rng.normal(size=m) > 0, 1.0, -1.0)


def gradient(K, y, alpha, b, C, c):
    "g(z) of (21) from the full matrices."
    return (np.outer(y, y) * K) @ alpha + np.where(alpha >= 0, 1 / C, 1 / c) * alpha - 1 + y * b


def assert_stationary_95(K, y, result, s, eta, C, c, atol):
    "(95): g_S = 0, eta |g_Sbar|_inf <= |alpha|_[s], |alpha|_0 <= s, <alpha, y> = 0; all from alpha and b alone."
    alpha, b = result.alpha, result.bias
    g = gradient(K, y, alpha, b, C, c)
    S = np.flatnonzero(alpha)
    s_th_largest = np.sort(np.abs(alpha))[::-1][s - 1]
    assert len(S) <= s
    assert np.abs(g[S]).max() <= atol
    assert eta * np.abs(np.delete(g, S)).max() <= s_th_largest + atol
    assert abs(alpha @ y) <= atol


@pytest.mark.parametrize("C, c", [(0.25, 0.0025), (1.0, 0.5), (2.0, 2.0)])
@pytest.mark.parametrize("jacobian", JACOBIANS)
def test_with_s_equal_m_it_solves_the_dual_and_the_primal_of_scipy(C, c, jacobian):
    X, y = linear_problem(70, 3, seed=2)
    ours = solve_nssvm(X, y, C=C, c=c, s=len(y), jacobian=jacobian, tol=1e-10)
    dual, primal = nssvm_dual_scipy(X @ X.T, y, C, c), nssvm_primal_scipy(X, y, C, c)
    assert ours.converged and dual["success"] and primal["success"]
    assert ours.objective == pytest.approx(dual["objective"], abs=1e-9)
    np.testing.assert_allclose(ours.alpha, dual["alpha"], atol=1e-5)
    assert np.linalg.norm(ours.info["w"] - primal["w"]) < 1e-6
    assert ours.bias == pytest.approx(primal["b"], abs=1e-6)
    assert primal["objective"] == pytest.approx(-ours.objective, abs=1e-9)          # strong duality, P* = -D*


@pytest.mark.parametrize("jacobian", JACOBIANS)
@pytest.mark.parametrize("m, n, s", [(300, 4, 40), (120, 30, 20)])        # s > n (Woodbury) and s <= n (Cholesky)
@pytest.mark.parametrize("sparse", [False, True])
def test_fast_path_follows_the_reference_step_for_step(jacobian, m, n, s, sparse):
    X, y = linear_problem(m, n, seed=1)
    ref = reference_nssvm(X @ X.T, y, 0.25, 0.0025, s, 1 / m, balanced_working_set(y, s),
                          b0=1.0 if y.sum() > 0 else -1.0, jacobian=jacobian, tol=1e-9)
    ours = solve_nssvm(sp.csr_matrix(X) if sparse else X, y, s=s, jacobian=jacobian, tol=1e-9)
    assert ours.n_iter == len(ref["residual"]) - 1
    np.testing.assert_allclose(ours.trace["residual"], ref["residual"], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ours.trace["objective"], ref["objective"], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ours.alpha, ref["alpha"], atol=1e-10)
    assert ours.bias == pytest.approx(ref["b"], abs=1e-10)
    assert np.array_equal(ours.info["working_set"], ref["working_sets"][-1])


@pytest.mark.parametrize("jacobian", JACOBIANS)
@pytest.mark.parametrize("s", [15, 60])
def test_exit_satisfies_the_stationarity_conditions_95(jacobian, s):
    X, y = linear_problem(400, 5, seed=3)
    res = solve_nssvm(X, y, s=s, jacobian=jacobian, tol=1e-10)
    assert res.converged and res.certificate.measure == "stationarity_residual"
    assert_stationary_95(X @ X.T, y, res, s, 1 / 400, 0.25, 0.0025, atol=1e-8)
    T = res.info["working_set"]
    assert abs(y[T] @ res.alpha[T]) < 1e-10 and len(T) == s
    # the certificate is ||F(z; T)|| of (36), recomputed here from the full matrices
    g = gradient(X @ X.T, y, res.alpha, res.bias, 0.25, 0.0025)
    off = np.setdiff1d(np.arange(400), T)
    F = np.r_[g[T], res.alpha[off], y[T] @ res.alpha[T]]
    assert res.certificate.value == pytest.approx(np.linalg.norm(F), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_nnz_never_exceeds_s_along_the_way(seed):
    X, y = linear_problem(3000, 6, seed=seed)
    rng = np.random.default_rng(seed)
    for kwargs in (dict(), dict(alpha0=rng.uniform(0, 1, len(y))), dict(tune_s=True), dict(jacobian="exact")):
        res = solve_nssvm(X, y, s=100, **kwargs)
        t = res.trace
        start = 1 if "alpha0" in kwargs else 0           # a warm start may hold more than s non-zeros
        assert (t["nnz"][start:] <= t["s"][start:]).all() and (t["working_set"] == t["s"]).all()
        assert res.info["nnz"] == np.count_nonzero(res.alpha) <= res.info["s"]
        assert list(res.support) == list(np.flatnonzero(res.alpha))


def test_one_step_from_near_a_stationary_point_theorem_3_1():
    X, y = linear_problem(5000, 8, seed=7)
    star = solve_nssvm(X, y, s=300, tol=1e-10)
    assert star.converged
    rng = np.random.default_rng(0)
    for _ in range(10):
        alpha = star.alpha.copy()
        alpha[star.support] *= 1 + 1e-5 * rng.uniform(-1, 1, len(star.support))
        near = solve_nssvm(X, y, s=300, alpha0=alpha, b0=star.bias + 1e-7, tol=1e-10)
        assert near.trace["residual"][0] > 1e-10 and near.n_iter == 1 and near.converged
        np.testing.assert_allclose(near.alpha, star.alpha, atol=1e-10)


def test_random_starts_are_measured_and_each_converged_run_is_stationary():
    # the paper observes <= 6 steps from 50 starts (Fig. 5); nothing proves it, so only what is proven is asserted
    X, y = linear_problem(2000, 5, seed=8)
    rng = np.random.default_rng(1)
    steps = []
    for _ in range(10):
        res = solve_nssvm(X, y, s=150, alpha0=rng.uniform(0, 1, len(y)), tol=1e-9)
        steps.append(res.n_iter)
        if res.converged: assert_stationary_95(X @ X.T, y, res, 150, 1 / 2000, 0.25, 0.0025, atol=1e-7)
    assert max(steps) < 1000


def test_dense_and_csr_give_the_same_model():
    rng = np.random.default_rng(4)
    X = sp.random(3000, 200, density=0.03, format="csr", random_state=4, data_rvs=lambda k: rng.uniform(0, 1, k))
    y = np.where(X @ rng.normal(size=200) > 0, 1.0, -1.0)
    for s in (100, 350):                                  # s <= n and s > n
        a, b = solve_nssvm(X, y, s=s), solve_nssvm(X.toarray(), y, s=s)
        assert a.n_iter == b.n_iter and a.converged == b.converged
        np.testing.assert_allclose(a.alpha, b.alpha, atol=1e-9)
        np.testing.assert_allclose(a.info["w"], b.info["w"], atol=1e-9)
    csc = solve_nssvm(X.tocsc(), y, s=100)                # other sparse formats are read as CSR
    np.testing.assert_allclose(csc.alpha, solve_nssvm(X, y, s=100).alpha, atol=1e-12)


def test_kernel_variant_solves_the_rbf_dual_of_scipy_and_follows_the_reference():
    X, _ = linear_problem(90, 2, seed=5)
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] > 0, 1.0, -1.0)
    kernel = Kernel("rbf", gamma=0.5)
    K = kernel(X)
    dual = nssvm_dual_scipy(K, y, 1.0, 0.1)
    full = solve_nssvm(kernel.cache(X), y, C=1.0, c=0.1, s=90, tol=1e-10)
    assert full.converged and full.objective == pytest.approx(dual["objective"], abs=1e-9)
    np.testing.assert_allclose(full.alpha, dual["alpha"], atol=1e-5)
    assert full.info["w"] is None and full.n_kernel_evals > 0
    ref = reference_nssvm(K, y, 1.0, 0.1, 25, 1 / 90, balanced_working_set(y, 25), b0=-1.0 if y.sum() <= 0 else 1.0,
                          tol=1e-9)
    ours = solve_nssvm(kernel.cache(X), y, C=1.0, c=0.1, s=25, tol=1e-9)
    np.testing.assert_allclose(ours.trace["residual"], ref["residual"], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ours.alpha, ref["alpha"], atol=1e-10)
    assert_stationary_95(K, y, ours, 25, 1 / 90, 1.0, 0.1, atol=1e-8)


def test_algorithm_2_grows_s_by_sigma_and_stops_stationary():
    X, y = linear_problem(8000, 10, seed=9)
    res = solve_nssvm(X, y, s=120, tune_s=True)
    chain = list(dict.fromkeys(res.trace["s"]))
    assert chain[0] == 120 and all(b == min(8000, math.ceil(1.1 * a)) for a, b in zip(chain, chain[1:]))
    assert res.info["s"] == chain[-1] and res.info["s_increases"] == len(chain) - 1 <= 9
    assert res.converged and res.info["nnz"] <= res.info["s"]
    fixed = solve_nssvm(X, y, s=120, tune_s=True, sigma=1.0)          # sigma = 1 is Algorithm 1
    plain = solve_nssvm(X, y, s=120)
    np.testing.assert_allclose(fixed.alpha, plain.alpha, atol=1e-12)


def test_the_papers_literal_start_cycles_at_zero_when_the_minority_class_fills_T():
    X, y = linear_problem(1000, 4, seed=10)
    res = solve_nssvm(X, y, s=50, init="paper", safeguards=False, max_iter=15)
    assert not res.converged and res.info["nnz"] == 0 and res.n_iter == 15
    assert solve_nssvm(X, y, s=50).converged


def test_defaults_of_the_paper():
    assert sparsity_level(6414, 123, 0.2) == 801 and sparsity_level(32561, 123, 0.2) == 1594      # a5a, a9a (the note)
    assert sparsity_level(10**8, 2, 1.0) == 1309 and sparsity_level(10, 10) == 10
    assert sparsity_level(10**6, 2, 1e-9) == 1
    assert default_tolerance(10**4, 20) == pytest.approx(1e-4)
    X, y = linear_problem(2000, 5)
    res = solve_nssvm(X, y)
    assert res.info["s"] == sparsity_level(2000, 5, 0.5) and res.info["eta0"] == 1 / 2000
    assert res.info["c"] == pytest.approx(0.25 / 100) and res.certificate.tol == default_tolerance(2000, 5)


def test_top_s_is_the_stable_selection_with_ties_to_the_smaller_index():
    rng = np.random.default_rng(0)
    for _ in range(20):
        scores = rng.integers(0, 5, 50).astype(float)
        s = int(rng.integers(1, 51))
        np.testing.assert_array_equal(top_s(scores, s), np.sort(np.argsort(-scores, kind="stable")[:s]))


@pytest.mark.parametrize("bad, name", [
    (dict(C=0.0), "C=0.0"), (dict(C=np.inf), "C=inf"), (dict(c=0.0), "c=0.0"), (dict(c=0.3), "c=0.3"),
    (dict(s=0), "s=0"), (dict(s=41), "s=41"), (dict(s=3.0), "s=3.0"), (dict(eta=0.0), "eta=0.0"),
    (dict(jacobian="newton"), "jacobian='newton'"), (dict(init="zeros"), "init='zeros'"),
    (dict(max_iter=-1), "max_iter=-1"), (dict(tol=0.0), "tol=0.0"), (dict(sigma=0.5), "sigma=0.5"),
    (dict(sigma=True), "sigma=True"),
    (dict(beta=0.0), "beta=0.0"), (dict(alpha0=np.zeros(3)), "alpha0"), (dict(b0=np.nan), "b0=nan"),
])
def test_bad_parameters_are_named(bad, name):
    X, y = linear_problem(40, 3)
    with pytest.raises(ValueError, match=name.replace("(", r"\(").replace("[", r"\[")):
        solve_nssvm(X, y, **bad)


def test_bad_data_is_refused():
    X, y = linear_problem(40, 3)
    with pytest.raises(ValueError, match="y must"): solve_nssvm(X, np.ones(40))
    with pytest.raises(ValueError, match="y must"): solve_nssvm(X, np.r_[y[:-1], 0.0])
    with pytest.raises(ValueError, match="y must"): solve_nssvm(X, y[:-1])
    with pytest.raises(ValueError, match="NaN"): solve_nssvm(np.r_[X[:-1], [[np.nan, 0, 0]]], y)
    bad = sp.csr_matrix(X); bad.data[0] = np.inf
    with pytest.raises(ValueError, match="NaN"): solve_nssvm(bad, y)


def test_a_cycle_is_ended_by_halving_eta_and_the_paper_setting_keeps_cycling():
    from sklearn.datasets import make_blobs
    X, labels = make_blobs(n_samples=300, random_state=0, n_features=2, cluster_std=0.1)
    for positive in range(3):
        y = np.where(labels == positive, 1.0, -1.0)
        guarded = solve_nssvm(X, y, tol=1e-10)
        assert guarded.converged and guarded.trace["eta"][-1] == guarded.info["eta"] <= 1 / 300
        assert_stationary_95(X @ X.T, y, guarded, guarded.info["s"], guarded.info["eta"], 0.25, 0.0025, atol=1e-8)
    cycling = solve_nssvm(X, np.where(labels == 1, 1.0, -1.0), safeguards=False, max_iter=100)
    assert not cycling.converged and cycling.info["eta_halvings"] == 0 and (cycling.trace["eta"] == 1 / 300).all()


def test_a_one_class_working_set_gets_a_point_of_the_other_class():
    # scikit-learn's estimator checks met this: 15 points, s = 3; without the guard the iteration falls into alpha = 0
    # on a one-class T and stays there
    X = np.random.RandomState(0).normal(size=(15, 4))
    y = np.array([-1, 1, -1, -1, -1, 1, 1, -1, -1, -1, -1, 1, -1, -1, 1], dtype=float)
    guarded, literal = (solve_nssvm(X, y, s=3, jacobian="exact", safeguards=flag, max_iter=200) for flag in (True, False))
    assert not literal.converged and literal.info["nnz"] == 0
    assert guarded.converged and len(np.unique(y[guarded.info["working_set"]])) == 2
    assert_stationary_95(X @ X.T, y, guarded, 3, guarded.info["eta"], 0.25, 0.0025, atol=1e-8)
    paper_start = solve_nssvm(*linear_problem(1000, 4, seed=10), s=50, init="paper")     # the guard also fixes T0
    assert paper_start.converged and paper_start.info["nnz"] > 0


@pytest.mark.parametrize("tune_s", [False, True])
def test_reference_heuristics_return_the_best_accuracy_model_and_certify_it_honestly(tune_s):
    X, y = linear_problem(4000, 6, seed=11)
    code = solve_nssvm(X, y, reference_heuristics=True, tune_s=tune_s)
    pure = solve_nssvm(X, y, tune_s=tune_s)
    w, b = code.info["w"], code.bias
    np.testing.assert_allclose(w, X.T @ (code.alpha * y), atol=1e-10)               # one consistent model
    assert code.info["code_accuracy"] == pytest.approx(np.mean(np.sign(X @ w + b) == y))
    assert code.info["code_accuracy"] >= code.trace["accuracy"].max() - 1e-4         # the best-accuracy iterate
    assert code.info["eta0"] == min(1 / 4000, 1e-4) and code.info["nnz"] <= code.info["s"]
    g = gradient(X @ X.T, y, code.alpha, b, 0.25, 0.0025)                             # ||F|| at the model returned
    T = code.info["working_set"]
    F = np.r_[g[T], np.delete(code.alpha, T), y[T] @ code.alpha[T]]
    assert code.certificate.value == pytest.approx(np.linalg.norm(F), rel=1e-9)
    assert code.converged == (code.certificate.value <= code.certificate.tol)
    assert pure.converged and not pure.info["reference_heuristics"] and code.info["reference_heuristics"]


def test_reference_code_bias_search_and_accuracy_follow_matlab():
    from klrlab.solvers.nssvm import _code_accuracy, _code_bias_search
    f, y = np.array([-2.0, -1.0, 0.0, 1.0, 2.0]), np.array([-1.0, -1.0, 1.0, 1.0, 1.0])
    assert _code_accuracy(f, 0.0, y) == pytest.approx(0.8)           # sign(0) = 0 counts as an error
    assert _code_accuracy(f, 0.5, y) == 1.0
    b = _code_bias_search(f, y, 0.2, 20, squared=True)
    assert _code_accuracy(f, b, y) == 1.0


def test_a_newton_system_too_large_to_allocate_names_s_and_beta(monkeypatch):
    from klrlab.solvers import nssvm
    def out_of_memory(self, T, d, R): raise MemoryError("Unable to allocate")
    monkeypatch.setattr(nssvm._LinearTerms, "_solve", out_of_memory)
    rng = np.random.default_rng(0)
    X = sp.random(40, 400, density=0.05, format="csr", random_state=0)
    y = np.where(rng.random(40) < 0.5, 1.0, -1.0)
    with pytest.raises(MemoryError, match=r"dense \d+ x \d+ matrix .* give a smaller s \(or beta"):
        solve_nssvm(X, y)


def first_stop_of_algorithm_2(trace, m, tol, max_increases) -> int:
    """The step Algorithm 2 stops at by (66)-(67), read from a trace alone: the first k with ||F|| < tol and, while s can
    still grow, ACC_k within 1e-4 of the best ACC of the iterates 1..k-1 (0 when there are none; the start excluded)."""
    s, accuracy = np.asarray(trace["s"]), np.asarray(trace["accuracy"])
    for k, residual in enumerate(trace["residual"]):
        increases = int(np.sum(np.diff(s[:k + 1]) != 0))
        can_grow = s[k] < m and increases < max_increases
        best_before = max(accuracy[1:k], default=0.0)
        if residual < tol and (not can_grow or abs(accuracy[k] - best_before) < 1e-4): return k
    return len(trace["residual"]) - 1


# Weak or no signal: later iterates classify worse than the start's majority vote, whose ACC (67) must leave out
@pytest.mark.parametrize("seed, share, signal", [(0, 0.5, 0.0), (1, 0.8, 0.3), (3, 0.95, 0.0), (6, 0.9, 0.0),
                                                 (2, 0.9, 0.8)])
def test_algorithm_2_stops_at_the_first_step_that_meets_66_and_67(seed, share, signal):
    rng = np.random.default_rng(seed)
    m = 300
    y = np.where(rng.random(m) < share, -1.0, 1.0)
    X = rng.normal(size=(m, 6)) + signal * y[:, None] * rng.normal(size=6)
    res = solve_nssvm(X, y, s=8, tune_s=True, tol=1e-8)
    assert res.n_iter == first_stop_of_algorithm_2(res.trace, m, 1e-8, 9)
