"""Frank-Wolfe solvers of the L2-SVM's MEB dual: agreement with the NumPy reference, the QP oracle, the invariants of the
paper's note (simplex, monotone radius, exact R), sampling, warm starts and bad input."""
import numpy as np
import pytest

from klrlab.datasets import make_twonorm
from klrlab.dual import meb_delta2, meb_matrix, meb_relative_gap, meb_tolerance
from klrlab.kernels import Kernel
from klrlab.reference import l2svm_dual_qp, reference_frank_wolfe
from klrlab.solvers._frank_wolfe import ALGORITHM_CODES, frank_wolfe
from klrlab.solvers.frank_wolfe import ALGORITHMS, _scores, initial_alpha, solve_frank_wolfe


@pytest.fixture(scope="module")
def small():
    X, y = make_twonorm(80, n_features=5, seed=11)
    kernel = Kernel("rbf", gamma=0.2)
    return X, y, kernel, kernel(X)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("C", [0.1, 10.0])
def test_objective_matches_the_qp_oracle_within_the_certified_gap(small, algorithm, C):
    X, y, kernel, K = small
    qp = l2svm_dual_qp(K, y, C)
    eps = 1e-4 if algorithm == "fw" else 1e-8
    res = solve_frank_wolfe(kernel.cache(X), y, C, algorithm, eps=eps, random_state=1)
    assert res.converged and res.certificate.measure == "relative_dual_gap"
    assert res.certificate.value <= meb_tolerance(eps)
    assert (1 - res.certificate.value) * qp["objective"] <= res.objective <= qp["objective"] * (1 + 1e-12)
    assert np.isclose(res.alpha.sum(), 1.0) and (res.alpha >= 0).all()
    if algorithm != "fw":       # converged tightly: the KKT conditions of (12) fix the bias without its formula
        margins = y * (K @ (res.alpha * y) + res.bias) + res.alpha / C      # (Q alpha)_i, with f's own bias
        support = res.alpha > 1e-6 * res.alpha.max()
        level = margins[support].mean()
        assert np.ptp(margins[support]) <= 1e-4 * level and margins.min() >= (1 - 1e-4) * level


@pytest.mark.parametrize("algorithm", ["fw", "mfw", "pairwise"])
@pytest.mark.parametrize("kernel", [Kernel("rbf", gamma=0.2), Kernel("poly", gamma=0.1, degree=2, coef0=1.0)])
def test_compiled_loop_follows_the_reference_step_for_step(small, algorithm, kernel):
    X, y, _, _ = small
    Q = meb_matrix(kernel(X), y, 1.0)
    start = np.zeros(len(y)); start[[3, 40]] = 0.5
    ours = solve_frank_wolfe(kernel.cache(X), y, 1.0, algorithm, eps=1e-5, alpha0=start, trace=True, max_iter=400,
                             refine=False, objective_tol=None)
    ref = reference_frank_wolfe(Q, start, algorithm, meb_tolerance(1e-5), max_iter=400)
    assert list(ours.trace["step"]) == list(ref["step"])
    np.testing.assert_allclose(ours.trace["objective"], ref["objective"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours.alpha, ref["alpha"], atol=1e-11)


def test_away_steps_keep_R_exact_and_fw_steps_never_shrink_the_ball():
    # the check that fails with Algorithm 3's printed step 21: (delta_- - 1) in place of (1 - delta_-)
    X, y = make_twonorm(300, seed=2)
    kernel = Kernel("rbf", gamma=0.05)
    cache, Q = kernel.cache(X), meb_matrix(kernel(X), y, 1.0)
    alpha = np.full(len(y), 1 / len(y))
    s, R = _scores(cache, y, 1.0, alpha)
    buffers = (np.empty(6001), np.empty(6001), np.empty(6001, dtype=np.int8), np.empty(6001, dtype=np.int64),
               np.empty(6001, dtype=np.int64))
    steps, R, _ = frank_wolfe(cache, y, 1.0, alpha, s, R, meb_delta2(cache.diagonal, 1.0),
                              np.arange(len(y), dtype=np.intp), ALGORITHM_CODES["mfw"], 1e-13, 6000, 0, 1, 0, *buffers)
    away = np.isin(buffers[2][:steps], (1, 2)).sum()
    assert away > 500 and abs(R - alpha @ Q @ alpha) < 1e-12 and np.allclose(s, Q @ alpha, atol=1e-12)
    assert np.isclose(alpha.sum(), 1.0) and (alpha >= 0).all()
    fw = solve_frank_wolfe(cache, y, 1.0, "fw", eps=1e-5, trace=True, max_iter=2000, refine=False, random_state=0)
    assert (np.diff(fw.trace["objective"]) >= -1e-15).all()              # r^2 = Delta^2 - R never decreases


def test_certificate_is_the_full_gap_recomputed_from_scratch(small):
    X, y, kernel, K = small
    Q = meb_matrix(K, y, 2.0)
    res = solve_frank_wolfe(kernel.cache(X), y, 2.0, "mfw", eps=1e-6, random_state=0)
    s = Q @ res.alpha
    assert res.certificate.value == pytest.approx(meb_relative_gap(s, res.alpha @ s, meb_delta2(np.diag(K), 2.0)),
                                                  rel=1e-9, abs=1e-15)
    assert res.objective == pytest.approx(np.max(np.diag(Q)) - res.alpha @ Q @ res.alpha, rel=1e-13)


@pytest.mark.parametrize("algorithm", ["fw", "mfw"])
def test_certificate_is_the_frank_wolfe_gap_by_its_definition_and_bounds_the_loss(small, algorithm):
    X, y, kernel, K = small
    Q, optimum = meb_matrix(K, y, 2.0), l2svm_dual_qp(K, y, 2.0)["objective"]
    for max_iter in (3, 15, 60):                                        # stopped early: a gap far from zero
        res = solve_frank_wolfe(kernel.cache(X), y, 2.0, algorithm, eps=1e-12, max_iter=max_iter, random_state=0)
        alpha = res.alpha
        g, gradient = np.max(np.diag(Q)) - alpha @ Q @ alpha, -2.0 * Q @ alpha
        gap = (gradient.max() - alpha @ gradient) / g                   # max over the simplex's vertices, minus here
        assert gap > 1e-6 and res.certificate.value == pytest.approx(gap, rel=1e-9)
        assert (optimum - g) / g <= gap                                 # concavity: the gap bounds the loss


def test_cvm_search_returns_the_farthest_point_of_its_sample(small):
    from klrlab.solvers.frank_wolfe import _sampled_farthest
    X, y, kernel, K = small
    Q, n = meb_matrix(K, y, 2.0), len(y)
    alpha = np.zeros(n)
    alpha[[0, 5, 9, 40]] = 0.25                                          # a core set's ball
    delta2, R = np.max(np.diag(Q)), alpha @ Q @ alpha
    squared_distance = delta2 + R - 2.0 * Q @ alpha                     # gamma_i^2 to the ball's centre
    for sample_size, seed in ((n, 0), (20, 1), (20, 2)):
        rng = np.random.default_rng(seed)
        sample = np.sort(np.random.default_rng(seed).choice(n, sample_size, replace=False))   # the draw it makes
        i = _sampled_farthest(kernel.cache(X), y, 2.0, alpha, np.zeros(n), R, delta2, 1e-6, rng, sample_size, 1)
        assert i == sample[np.argmax(squared_distance[sample])]


def test_sampled_search_stops_on_its_sample_and_refines_to_the_full_gap():
    X, y = make_twonorm(1500, seed=4)
    cache = Kernel("rbf", gamma=0.05).cache(X)
    loose = solve_frank_wolfe(cache, y, 1.0, "mfw", eps=1e-4, sample_size=5, refine=False, random_state=3)
    refined = solve_frank_wolfe(cache, y, 1.0, "mfw", eps=1e-4, sample_size=5, refine=True, random_state=3)
    assert loose.certificate.value > loose.certificate.tol and not loose.converged     # the sample missed violators
    assert refined.converged and refined.info["refinements"] >= 1
    again = solve_frank_wolfe(cache, y, 1.0, "mfw", eps=1e-4, sample_size=5, refine=False, random_state=3)
    np.testing.assert_array_equal(again.alpha, loose.alpha)                              # seeded: bit for bit


def test_cvm_and_both_starts_reach_the_same_ball(small):
    X, y, kernel, _ = small
    objectives = [solve_frank_wolfe(kernel.cache(X), y, 1.0, algorithm, eps=1e-9, init=init, random_state=5).objective
                  for algorithm in ("cvm", "mfw", "pairwise") for init in ("random20", "two-point")]
    assert np.ptp(objectives) < 1e-7 * max(objectives)


def test_initial_alpha_two_point_takes_the_farthest_point(small):
    X, y, kernel, K = small
    Q = meb_matrix(K, y, 1.0)
    alpha = initial_alpha(kernel.cache(X), y, 1.0, "two-point", rng=np.random.default_rng(7))
    a, b = np.flatnonzero(alpha)
    distances_from = lambda i: np.diag(Q) + Q[i, i] - 2 * Q[i]
    assert alpha[a] == alpha[b] == 0.5
    assert b == np.argmax(distances_from(a)) or a == np.argmax(distances_from(b))


def test_warm_start_from_the_solution_takes_no_step(small):
    X, y, kernel, _ = small
    first = solve_frank_wolfe(kernel.cache(X), y, 1.0, "mfw", eps=1e-6, random_state=0)
    again = solve_frank_wolfe(kernel.cache(X), y, 1.0, "mfw", eps=1e-6, alpha0=first.alpha)
    assert again.n_iter == 0 and again.converged


def test_duplicate_points_with_opposite_labels(small):
    X, y, kernel, K = small
    X2, y2 = np.r_[X, X[:5]], np.r_[y, -y[:5]]
    res = solve_frank_wolfe(kernel.cache(X2), y2, 1.0, "pairwise", eps=1e-8, random_state=0)
    qp = l2svm_dual_qp(kernel(X2), y2, 1.0)
    assert res.converged and res.objective == pytest.approx(qp["objective"], rel=1e-7)


@pytest.mark.parametrize("bad,message", [
    (dict(C=0.0), "C=0.0"), (dict(C=np.inf), "C=inf"), (dict(eps=0.0), "eps=0.0"), (dict(eps=1.0), "eps=1.0"),
    (dict(algorithm="smo"), "algorithm='smo'"), (dict(init="zero"), "init='zero'"), (dict(n_init=1), "n_init=1"),
    (dict(sample_size=0), "sample_size=0"), (dict(n_trials=0), "n_trials=0"), (dict(max_iter=-1), "max_iter=-1"),
    (dict(alpha0=np.zeros(80)), "alpha0"), (dict(y=np.ones(80)), "both labels"), (dict(y=np.ones(3)), "one label per"),
])
def test_bad_input_is_refused_with_the_parameter_named(small, bad, message):
    X, y, kernel, _ = small
    args = dict(cache=kernel.cache(X), y=y, C=1.0) | bad
    with pytest.raises(ValueError, match=message):
        solve_frank_wolfe(**args)
    with pytest.raises(TypeError, match="KernelCache"):
        solve_frank_wolfe(kernel(X), y, 1.0)


def test_pool_only_steps_keep_the_pool_scores_exact_and_scores_at_fills_the_rest(small):
    from klrlab.solvers._frank_wolfe import scores_at
    X, y, kernel, K = small
    cache, Q = kernel.cache(X), meb_matrix(K, y, 1.0)
    pool = np.arange(0, 80, 3, dtype=np.intp)
    alpha = np.zeros(len(y)); alpha[pool[:2]] = 0.5
    s, R = _scores(cache, y, 1.0, alpha)
    _, R, _ = frank_wolfe(cache, y, 1.0, alpha, s, R, meb_delta2(cache.diagonal, 1.0), pool, ALGORITHM_CODES["mfw"],
                          1e-10, 5000, 0, 1, 0, pool_only=True)
    assert not alpha[np.setdiff1d(np.arange(80), pool)].any()
    np.testing.assert_allclose(s[pool], (Q @ alpha)[pool], atol=1e-12)
    assert abs(R - alpha @ Q @ alpha) < 1e-12
    others = np.setdiff1d(np.arange(80), pool).astype(np.intp)
    scores_at(cache, y, 1.0, alpha, others, s)
    np.testing.assert_allclose(s, Q @ alpha, atol=1e-12)


def test_sampled_cvm_reaches_the_qp_objective(small):
    X, y, kernel, K = small
    qp = l2svm_dual_qp(K, y, 1.0)
    res = solve_frank_wolfe(kernel.cache(X), y, 1.0, "cvm", eps=1e-8, sample_size=10, n_trials=7, random_state=2)
    assert res.converged and res.objective == pytest.approx(qp["objective"], rel=1e-7)


def test_the_starting_balls_steps_are_reported_beside_the_main_loops(small):
    # n_iter is the main loop; the random20 start solves its own small ball first, and says how many steps it took
    X, y, kernel, _ = small
    cache = kernel.cache(X)
    ball = solve_frank_wolfe(cache, y, 2.0, "mfw", eps=1e-6, random_state=0)
    pair = solve_frank_wolfe(cache, y, 2.0, "mfw", eps=1e-6, init="two-point", random_state=0)
    warm = solve_frank_wolfe(cache, y, 2.0, "mfw", eps=1e-6, alpha0=ball.alpha)
    assert ball.info["init_steps"] > 0 and pair.info["init_steps"] == 0 and warm.info["init_steps"] == 0


def test_cvm_solves_an_unsolved_start_before_it_reads_a_core_point_as_rounding():
    # a linear kernel: the two starting points have unequal norms, so their equal weights are not the pair's solution
    X = np.array([[-1.74, -1.34], [-1.36, -0.35], [-2.31, -0.19], [-0.96, 0.89], [0.96, 1.39], [0.77, -0.05]])
    y = np.array([1.0, 1, 1, -1, -1, -1])
    cache = Kernel("linear").cache(X)
    exact = solve_frank_wolfe(cache, y, 3.0, "mfw", eps=1e-9, random_state=0)
    starts = [dict(init="two-point"), dict(alpha0=np.r_[1.0, 0, 0, 0, 0, 1.0])]
    for start in starts:
        cvm = solve_frank_wolfe(cache, y, 3.0, "cvm", eps=1e-6, random_state=0, **start)
        assert cvm.converged and cvm.info["status"] == "converged" and cvm.n_iter > 0, start
        # the certificate bounds the relative distance to the optimum of g = Delta^2 - alpha'Q alpha
        assert abs(cvm.objective - exact.objective) <= cvm.certificate.value * abs(exact.objective) + 1e-12, start


def test_the_start_reports_whether_it_is_its_cores_solved_ball(small):
    from klrlab.solvers.frank_wolfe import _initial_alpha_and_steps, _start
    X, y, kernel, K = small
    cache = kernel.cache(X)
    rng = np.random.default_rng(0)
    alpha, steps, solved = _initial_alpha_and_steps(cache, y, 2.0, "random20", 20, rng)
    assert solved and steps > 0 and np.count_nonzero(alpha) <= 20
    assert not _initial_alpha_and_steps(cache, y, 2.0, "two-point", 20, rng)[2]
    assert not _start(cache, y, 2.0, "random20", 20, rng, alpha)[2]      # a warm start is never taken as solved
