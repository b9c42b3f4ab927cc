"""The Import Vector Machine's solver: one-step values against a Newton step built from scratch, the compiled loss loop
against NumPy and its shape errors, sampled candidates' scores, and the solver's record."""
import numpy as np
import pytest

from klrlab.kernels import Kernel
from klrlab.reference import one_newton_step_value
from klrlab.solvers._ivm import add_candidate_losses
from klrlab.solvers.ivm import _newton_fit, _one_step_values, solve_ivm


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
        assert abs(values[l] - one_newton_step_value(K, S, l, y, C, beta, b)) <= 1e-9 * abs(values[l])


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


def test_ivm_candidate_sample_scores_are_the_full_scores(data):
    X, y, _, _ = data
    K, yy = np.ascontiguousarray(Kernel("rbf", gamma=0.5)(X)), np.where(y > 0, 1.0, -1.0)
    S = np.array([4, 40, 77])
    beta, b, _ = _newton_fit(K[:, S], K[np.ix_(S, S)], yy, 3.0, np.zeros(3), 0.0)
    sample = np.array([0, 9, 41, 99])
    np.testing.assert_allclose(_one_step_values(K, S, yy, 3.0, beta, b, candidates=sample),
                               _one_step_values(K, S, yy, 3.0, beta, b)[sample], rtol=1e-12)


def test_solve_ivm_reports_its_imports_in_order_and_its_certificate(data):
    X, y, _, _ = data
    K, yy = Kernel("rbf", gamma=0.5)(X), np.where(y > 0, 1.0, -1.0)
    capped = solve_ivm(K, yy, 2.0, max_import=4)
    full = solve_ivm(K, yy, 2.0, max_import=10, tol=0.0)
    # greedy: the first imports do not depend on the cap
    assert list(capped.support) == list(full.support[:4])
    assert not capped.converged and capped.info["stopped_by"] == "max_import" and capped.certificate.value > 0
    assert capped.certificate.measure == "relative_improvement" and len(capped.trace["objective"]) == 5
    assert np.count_nonzero(capped.coef) <= 4 and np.all(
        capped.coef[np.setdiff1d(np.arange(len(y)), capped.support)] == 0
    )
    done = solve_ivm(K, yy, 2.0)
    assert done.converged and done.certificate.value < 1e-3 and done.info["stopped_by"] == "tol"


def test_the_path_starts_at_the_intercept_only_optimum():
    from scipy.optimize import minimize_scalar
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 3)); y = np.where(rng.random(60) < 0.25, 1.0, -1.0)     # imbalanced: b* far from 0
    K, C = Kernel("rbf", gamma=0.4)(X), 2.0
    intercept_only = minimize_scalar(lambda b: C * np.logaddexp(0.0, -y * b).sum(), bounds=(-10, 10), method="bounded")
    result = solve_ivm(K, y, C, max_import=3)
    assert result.trace["objective"][0] == pytest.approx(intercept_only.fun, rel=1e-9)
    assert (np.diff(result.trace["objective"]) < 0).all()                  # every import lowers H from there


def test_each_import_is_the_brute_force_best_one_step_candidate():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(40, 3)); y = np.where(X[:, 1] + 0.5 * rng.normal(size=40) > 0, 1.0, -1.0)
    K, C = Kernel("rbf", gamma=0.5)(X), 3.0
    result = solve_ivm(K, y, C, max_import=4)
    S, b = [], float(np.log((y > 0).mean() / (y < 0).mean()))
    for chosen in result.support:                                   # replay: at each import, every candidate's value
        beta = _newton_fit(K[:, S], K[np.ix_(S, S)], y, C, np.zeros(len(S)), b)[:2] if S else (np.zeros(0), b)
        values = {l: one_newton_step_value(K, np.array(S, dtype=np.intp), l, y, C, *beta)
                  for l in range(len(y)) if l not in S}
        assert chosen == min(values, key=values.get)
        S.append(int(chosen))


@pytest.mark.parametrize("labels", [np.array([0.0, 1.0] * 10), np.ones(20), np.array([-1.0, 2.0] * 10)])
def test_solve_ivm_names_labels_it_cannot_take(labels):
    K = np.eye(20)
    with pytest.raises(ValueError, match="y must hold both labels -1 and \\+1"):
        solve_ivm(K, labels, 1.0)
